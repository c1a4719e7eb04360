// Sharding parameters in place.
#include "tensorplay/distributed/tensor_parallel/detail/shard.h"

#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "tensorplay/core/ops/shape_ops.h"

namespace tensorplay::distributed::tensor_parallel::detail {
namespace {

// The splits made, by TensorImpl (checked alive and the same on lookup).
struct Record {
  std::weak_ptr<TensorImpl> impl;
  ShardSpec spec;
};
std::mutex records_mutex;
std::map<const TensorImpl*, Record>& records() {
  static std::map<const TensorImpl*, Record> all;
  return all;
}

void record(const Tensor& t, ShardSpec spec) {
  std::lock_guard lock(records_mutex);
  auto& all = records();
  std::erase_if(all, [](const auto& entry) { return entry.second.impl.expired(); });
  all[&t.impl()] = {t.impl_ptr(), spec};
}

}  // namespace

std::optional<ShardSpec> shard_spec_of(const Tensor& t) {
  if (!t.defined()) return std::nullopt;
  std::lock_guard lock(records_mutex);
  const auto it = records().find(&t.impl());
  if (it == records().end() || it->second.impl.lock().get() != &t.impl()) return std::nullopt;
  return it->second.spec;
}

void shard_in_place(const Tensor& t, int64_t dim, int64_t rank, int64_t count, int64_t packed) {
  const int64_t size = t.size(dim);
  if (size % (count * packed) != 0)
    throw std::invalid_argument("shard_in_place: " + std::to_string(size) + " does not split in " +
                                std::to_string(count * packed));
  const int64_t part = size / packed, piece = part / count;
  std::vector<Tensor> pieces;
  for (int64_t p = 0; p < packed; ++p)
    pieces.push_back(narrow(t.detach(), dim, p * part + rank * piece, piece));
  Tensor shard = pieces.size() == 1 ? clone(pieces[0]) : cat(pieces, dim);
  TensorImpl& impl = t.impl();
  impl.storage = shard.impl().storage;
  impl.offset = shard.impl().offset;
  impl.shape = shard.shape();
  impl.grad.reset();
  record(t, {.dim = dim < 0 ? dim + t.dim() : dim, .count = count, .packed = packed});
}

void check_divides(int64_t size, int64_t count, const std::string& path, const char* style,
                   const char* what) {
  if (count > 0 && size % count == 0) return;
  throw std::invalid_argument(std::string(style) + ": '" + path + "' has " + what + " " +
                              std::to_string(size) + ", which " + std::to_string(count) +
                              " ranks do not divide; choose a tp degree that divides it");
}

}  // namespace tensorplay::distributed::tensor_parallel::detail
