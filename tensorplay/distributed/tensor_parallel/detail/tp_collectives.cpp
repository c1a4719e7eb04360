// Tensor parallelism's collectives, built on ProcessGroup::all_reduce and all_gather_tensors
// (reduce-scatter as an all-reduce and a local chunk, until the group has the real one).
#include "tensorplay/distributed/tensor_parallel/detail/tp_collectives.h"

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorplay/core/ops/shape_ops.h"

namespace tensorplay::distributed::tensor_parallel::detail {
namespace {

int64_t checked_dim(const Tensor& x, int64_t dim, const char* what) {
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  if (d < 0 || d >= x.dim())
    throw std::invalid_argument(std::string(what) + ": dimension " + std::to_string(dim) +
                                " is out of range for a tensor of shape " + to_string(x.shape()));
  return d;
}

// Counts one collective on `x` from construction to destruction.
class Counted {
 public:
  explicit Counted(const Tensor& x) : start_(std::chrono::steady_clock::now()) {
    thread_counters().calls += 1;
    thread_counters().bytes += static_cast<int64_t>(x.nbytes());
  }
  ~Counted() {
    thread_counters().seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

Counters& thread_counters() {
  thread_local Counters counters;
  return counters;
}

Tensor all_reduce_sum(const ProcessGroup& group, const Tensor& x) {
  Tensor out = clone(x.detach());
  if (group.size() == 1) return out;
  Counted counted(x);
  group.all_reduce(out);
  return out;
}

Tensor all_gather_dim(const ProcessGroup& group, const Tensor& x, int64_t dim) {
  const int64_t d = checked_dim(x, dim, "tensor parallel all-gather");
  if (group.size() == 1) return clone(x.detach());
  Counted counted(x);
  std::vector<std::vector<Tensor>> all = group.all_gather_tensors({x.detach()});
  std::vector<Tensor> pieces;
  pieces.reserve(all.size());
  for (auto& member : all) pieces.push_back(member.at(0).to(x.device()));
  return cat(pieces, d);
}

std::vector<Tensor> all_gather_pieces(const ProcessGroup& group, const Tensor& x) {
  if (group.size() == 1) return {clone(x.detach())};
  Counted counted(x);
  std::vector<Tensor> out;
  for (auto& member : group.all_gather_tensors({x.detach()}))
    out.push_back(member.at(0).to(x.device()));
  return out;
}

Tensor reduce_scatter_dim(const ProcessGroup& group, const Tensor& x, int64_t dim) {
  checked_dim(x, dim, "tensor parallel reduce-scatter");
  return local_chunk(group, all_reduce_sum(group, x), dim);
}

Tensor local_chunk(const ProcessGroup& group, const Tensor& x, int64_t dim) {
  const int64_t d = checked_dim(x, dim, "tensor parallel chunk");
  const int64_t n = group.size(), size = x.size(d);
  if (size % n != 0)
    throw std::invalid_argument("tensor parallel: dimension " + std::to_string(d) + " of shape " +
                                to_string(x.shape()) + " does not split evenly over " +
                                std::to_string(n) + " ranks; make it a multiple of the tp degree");
  const int64_t piece = size / n;
  return clone(narrow(x.detach(), d, group.rank() * piece, piece));
}

}  // namespace tensorplay::distributed::tensor_parallel::detail
