// Tensor layouts as bytes (layout_codec.h).
#include "tensorplay/core/detail/layout_codec.h"

#include <cstdint>
#include <cstring>

namespace tensorplay::detail {
namespace {

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }

}  // namespace

std::string encode_layouts(const std::vector<Tensor>& tensors) {
  std::string out;
  put_u64(out, tensors.size());
  for (const Tensor& t : tensors) {
    put_u64(out, static_cast<uint64_t>(t.dtype()));
    put_u64(out, t.shape().size());
    for (int64_t d : t.shape()) put_u64(out, static_cast<uint64_t>(d));
  }
  return out;
}

std::optional<std::vector<TensorLayout>> decode_layouts(const std::string& bytes) {
  size_t at = 0;
  bool short_read = false;
  auto next = [&]() -> uint64_t {
    if (at + 8 > bytes.size()) {
      short_read = true;
      return 0;
    }
    uint64_t v;
    std::memcpy(&v, bytes.data() + at, 8);
    at += 8;
    return v;
  };
  const uint64_t count = next();
  // Every layout takes at least two words: a count past that is damage, not a request.
  if (short_read || count > bytes.size() / 16) return std::nullopt;
  std::vector<TensorLayout> out(count);
  for (TensorLayout& layout : out) {
    layout.dtype = static_cast<DType>(next());
    const uint64_t rank = next();
    if (short_read || rank > (bytes.size() - at) / 8) return std::nullopt;
    layout.shape.resize(rank);
    for (int64_t& d : layout.shape) d = static_cast<int64_t>(next());
  }
  if (short_read) return std::nullopt;
  return out;
}

}  // namespace tensorplay::detail
