// The tensorplay checkpoint file: a StateDict written as one little-endian binary stream. Modules
// (nn/serialize.h) and optimizers (optim/serialize.h) save and load through it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "tensorplay/core/state_dict.h"

namespace tensorplay {

/// File format, version 2. Every integer is little-endian; there is no padding. Checksums are
/// CRC-32 (zlib's crc32, the polynomial of zip and PNG).
///
///   offset  size        field
///   0       8           magic: the bytes "TPLAYSD" followed by one zero byte
///   8       4  (u32)    version (2)
///   12      8  (u64)    count: number of tensors that follow
///   then `count` records, in the StateDict's order:
///           4  (u32)    name length L in bytes (at most 2^20)
///           L           name (UTF-8, no terminator), unique within the file
///           1  (u8)     dtype: 0 = float32, 1 = bfloat16
///           4  (u32)    rank R (0 for a scalar; at most 64)
///           8*R (i64)   dims, outermost first, each >= 0
///           8  (u64)    data length D in bytes: N * E, N = product of dims, E = 4 (float32)
///                       or 2 (bfloat16, the upper half of the float32 bits)
///           4  (u32)    CRC-32 of this record's fields above (name length to data length)
///           D           the elements, row-major, little-endian
///           4  (u32)    CRC-32 of the D data bytes
///   4  (u32)            CRC-32 of every byte of the file before it; the file ends here
///
/// Reading checks, before any allocation, that each record's sizes are sane (rank, name length,
/// no overflow in N * E, D equal to N * E) and that D fits in the bytes left in the file; then
/// both checksums of every record, the whole-file checksum, and that nothing follows it. Any
/// failure is a std::runtime_error naming the source, the tensor and the byte offset.
///
/// Version 1 (written before checksums existed) still loads: the same layout without the data
/// length, the two per-record checksums and the final checksum. Its records get every check
/// except the checksums, so a flipped data byte in a version-1 file goes unnoticed; save it
/// again to get version 2.
///
/// Tensors on a device are copied to the host to be written; loaded tensors live on the host.
inline constexpr char kCheckpointMagic[8] = {'T', 'P', 'L', 'A', 'Y', 'S', 'D', '\0'};
inline constexpr uint32_t kCheckpointVersion = 2;
/// The oldest version read_tensors still reads.
inline constexpr uint32_t kCheckpointOldestVersion = 1;

/// Writes `tensors` to `out` in the format above; every tensor must be defined.
void write_tensors(std::ostream& out, const StateDict& tensors);
/// Reads a StateDict written by write_tensors (version 2, or version 1); throws
/// std::runtime_error naming what is wrong (bad magic, unsupported version, truncated or corrupt
/// record, checksum mismatch, trailing bytes), the tensor, the byte offset and `source` (a path,
/// for messages). Nothing is returned unless the whole stream checked out.
StateDict read_tensors(std::istream& in, const std::string& source = "stream");

/// write_tensors into a file (created or truncated); throws std::runtime_error on I/O failure.
void save_tensors(const StateDict& tensors, const std::string& path);
/// read_tensors from a file; throws std::runtime_error when it cannot be opened or parsed.
StateDict load_tensors(const std::string& path);

}  // namespace tensorplay
