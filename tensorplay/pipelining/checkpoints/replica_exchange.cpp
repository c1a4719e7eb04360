// ReplicaExchange's default all_gather_tensors: each replica's shapes and dtypes in one
// all_gather, then the tensors' bytes, concatenated, in pieces of at most piece_bytes().
#include "tensorplay/pipelining/checkpoints/replica_exchange.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "tensorplay/core/detail/layout_codec.h"

namespace tensorplay::pipelining {
namespace {

// Host tensors of the layouts encode_layouts wrote, to be filled.
std::vector<Tensor> allocate_layout(const std::string& bytes) {
  const auto layouts = detail::decode_layouts(bytes);
  if (!layouts) throw std::runtime_error("replica exchange: a header is cut short");
  std::vector<Tensor> out;
  for (const detail::TensorLayout& layout : *layouts)
    out.push_back(empty(layout.shape, {.dtype = layout.dtype, .device = cpu()}));
  return out;
}

uint64_t total_bytes(const std::vector<Tensor>& tensors) {
  uint64_t n = 0;
  for (const Tensor& t : tensors) n += t.nbytes();
  return n;
}

// Copies bytes [from, from + n) of the tensors' concatenation into `out` (to_tensors: false) or
// `in` into it (to_tensors: true).
void copy_span(const std::vector<Tensor>& tensors, uint64_t from, uint64_t n, char* buffer,
               bool to_tensors) {
  uint64_t start = 0;
  for (const Tensor& t : tensors) {
    const uint64_t end = start + t.nbytes();
    const uint64_t lo = std::max(start, from), hi = std::min(end, from + n);
    if (lo < hi) {
      char* data = static_cast<char*>(t.raw_data()) + (lo - start);
      char* other = buffer + (lo - from);
      if (to_tensors)
        std::memcpy(data, other, hi - lo);
      else
        std::memcpy(other, data, hi - lo);
    }
    start = end;
  }
}

}  // namespace

std::vector<std::vector<Tensor>> ReplicaExchange::all_gather_tensors(
    const std::vector<Tensor>& mine) {
  std::vector<Tensor> hosts;
  for (const Tensor& t : mine) hosts.push_back(t.detach().cpu());
  const std::vector<std::string> layouts = all_gather(detail::encode_layouts(hosts));
  std::vector<std::vector<Tensor>> out(layouts.size());
  uint64_t longest = 0;
  for (size_t r = 0; r < layouts.size(); ++r) {
    out[r] = static_cast<int>(r) == rank() ? hosts : allocate_layout(layouts[r]);
    longest = std::max(longest, total_bytes(out[r]));
  }
  const uint64_t own = total_bytes(hosts), step = std::max<uint64_t>(piece_bytes(), 1);
  for (uint64_t from = 0; from < longest; from += step) {
    std::string piece(from < own ? std::min<uint64_t>(step, own - from) : 0, '\0');
    copy_span(hosts, from, piece.size(), piece.data(), false);
    std::vector<std::string> got = all_gather(piece);
    for (size_t r = 0; r < got.size(); ++r)
      if (static_cast<int>(r) != rank())
        copy_span(out[r], from, got[r].size(), got[r].data(), true);
  }
  return out;
}

}  // namespace tensorplay::pipelining
