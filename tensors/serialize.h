// The tensorplay checkpoint file: a StateDict written as one little-endian binary stream. Modules
// (nn/serialize.h) and optimizers (optim/serialize.h) save and load through it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "tensors/state_dict.h"

namespace tensorplay {

/// File format, version 1. Every integer is little-endian; there is no padding.
///
///   offset  size        field
///   0       8           magic: the bytes "TPLAYSD" followed by one zero byte
///   8       4  (u32)    version (1)
///   12      8  (u64)    count: number of tensors that follow
///   then `count` records, in the StateDict's order:
///           4  (u32)    name length L in bytes
///           L           name (UTF-8, no terminator), unique within the file
///           1  (u8)     dtype: 0 = float32, 1 = bfloat16
///           4  (u32)    rank R (0 for a scalar; at most 64)
///           8*R (i64)   dims, outermost first
///           N * E       the elements, row-major, little-endian; N = product of dims,
///                       E = 4 (float32) or 2 (bfloat16, the upper half of the float32 bits)
///
/// Tensors on a device are copied to the host to be written; loaded tensors live on the host.
inline constexpr char kCheckpointMagic[8] = {'T', 'P', 'L', 'A', 'Y', 'S', 'D', '\0'};
inline constexpr uint32_t kCheckpointVersion = 1;

/// Writes `tensors` to `out` in the format above; every tensor must be defined.
void write_tensors(std::ostream& out, const StateDict& tensors);
/// Reads a StateDict written by write_tensors; throws std::runtime_error naming what is wrong
/// (bad magic, unsupported version, truncated record) and `source` (a path, for messages).
StateDict read_tensors(std::istream& in, const std::string& source = "stream");

/// write_tensors into a file (created or truncated); throws std::runtime_error on I/O failure.
void save_tensors(const StateDict& tensors, const std::string& path);
/// read_tensors from a file; throws std::runtime_error when it cannot be opened or parsed.
StateDict load_tensors(const std::string& path);

}  // namespace tensorplay
