// The safetensors byte format without tensors: parsing and checking a file's header and layout,
// writing a header as the reference writer does, and widening elements to float. No Tensor here,
// so the fuzz target builds from this file alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tensorplay::detail {

/// The element types tensorplay reads from safetensors files (it writes the first two).
enum class StDType : uint8_t { F32, BF16, F16 };

/// Bytes per element.
constexpr size_t st_element_size(StDType dtype) { return dtype == StDType::F32 ? 4 : 2; }
/// The header's spelling: "F32", "BF16", "F16".
const char* st_dtype_name(StDType dtype);

/// One tensor of a file: its name, dtype, shape and byte range [begin, end) in the data section.
struct StEntry {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

/// What a checked header says.
struct StLayout {
  std::vector<StEntry> entries;                 ///< in the order of their bytes
  std::map<std::string, std::string> metadata;  ///< the "__metadata__" object, if any
  uint64_t data_start = 0;                      ///< 8 + the header length
  uint64_t data_size = 0;                       ///< bytes after the header (all of them tensors)
};

/// The largest header length accepted, as the reference reader (100 MB).
inline constexpr uint64_t kStMaxHeaderBytes = 100'000'000;
/// The largest rank accepted.
inline constexpr size_t kStMaxRank = 64;

/// Parses and checks a whole file held in `bytes` (`size` of them): the header length against
/// the file and the limit, UTF-8, JSON without repeated keys, each entry's dtype, shape and
/// offsets, and that the tensors tile the data section exactly (sorted by offset: no gap, no
/// overlap, nothing left over). Throws std::runtime_error starting with "safetensors: `source`:"
/// and naming what is wrong and where; returns only a layout whose every range lies in the file.
StLayout parse_safetensors(const unsigned char* bytes, size_t size, const std::string& source);

/// The header block for `entries` (whose offsets are already set) and `metadata` (written when
/// not empty), as the reference writer makes it: compact JSON with "__metadata__" first, then
/// the entries in the given order, each {"dtype","shape","data_offsets"}; padded with spaces to
/// a multiple of 8 bytes. Returns the 8-byte little-endian length followed by that block.
/// Throws std::invalid_argument when a name or metadata string is not valid UTF-8.
std::string encode_safetensors_header(const std::vector<StEntry>& entries,
                                      const std::map<std::string, std::string>& metadata);

/// Sorts entries as the reference writer lays out tensors (wider dtype first, then by name) and
/// assigns consecutive offsets from 0 in that order.
void st_assign_offsets(std::vector<StEntry>& entries);

/// Widens an IEEE half-precision value to float (exact, subnormals, infinities and NaN kept).
float float16_to_float(uint16_t bits);

/// Converts `count` elements of `dtype` stored little-endian at `src` (any alignment) to float.
void st_decode_to_float(StDType dtype, const unsigned char* src, size_t count, float* dst);

/// Byte offset of the first byte that breaks UTF-8 in [data, data + size), or size when valid.
size_t first_invalid_utf8(const unsigned char* data, size_t size);

}  // namespace tensorplay::detail
