// Tensor parallelism's collectives, built on ProcessGroup::all_reduce, all_gather_into_tensor,
// reduce_scatter_tensor and all_gather_tensors (pieces of any shape).
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
  const int64_t n = group.size();
  if (n == 1) return clone(x.detach());
  Counted counted(x);
  // The members' tensors one after the other, flat; then each put back along `dim`.
  const Tensor in = clone(x.detach());
  const int64_t count = in.numel();
  Tensor flat = empty({n * count}, {.dtype = in.dtype(), .device = in.device()});
  group.all_gather_into_tensor(flat, in.reshape({count}));
  std::vector<Tensor> pieces;
  pieces.reserve(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r)
    pieces.push_back(narrow(flat, 0, r * count, count).reshape(in.shape()));
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
  const int64_t d = checked_dim(x, dim, "tensor parallel reduce-scatter");
  const int64_t n = group.size(), size = x.size(d);
  if (n == 1) return clone(x.detach());
  if (size % n != 0)
    throw std::invalid_argument("tensor parallel: dimension " + std::to_string(d) + " of shape " +
                                to_string(x.shape()) + " does not split evenly over " +
                                std::to_string(n) + " ranks; make it a multiple of the tp degree");
  Counted counted(x);
  // Member r's chunk along `dim` made the r-th run of the flat input.
  const int64_t piece = size / n;
  std::vector<Tensor> chunks;
  chunks.reserve(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    const Tensor chunk = clone(narrow(x.detach(), d, r * piece, piece));
    chunks.push_back(chunk.reshape({chunk.numel()}));
  }
  Shape shape = x.shape();
  shape[d] = piece;
  Tensor out = empty(shape, {.dtype = x.dtype(), .device = x.device()});
  group.reduce_scatter_tensor(out, cat(chunks, 0));
  return out;
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
