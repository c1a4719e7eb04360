// The autograd-aware collectives: one node type whose backward is the forward's transpose.
#include "tensorplay/distributed/tensor_parallel/functional.h"

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/distributed/tensor_parallel/detail/tp_collectives.h"

namespace tensorplay::distributed::tensor_parallel {
namespace {

namespace tpd = detail;

// The backward of one collective: `transpose` applied to the output's gradient.
struct CollectiveBackward : autograd::Node {
  const char* op;
  std::function<Tensor(const Tensor&)> transpose;
  CollectiveBackward(const char* name, std::function<Tensor(const Tensor&)> t)
      : op(name), transpose(std::move(t)) {}
  const char* name() const override { return op; }
  std::vector<Tensor> apply(const Tensor& grad, const std::vector<bool>&) override {
    return {transpose(grad)};
  }
};

Tensor record(const char* name, const Tensor& x, Tensor out,
              std::function<Tensor(const Tensor&)> transpose) {
  return autograd::attach(std::move(out),
                          std::make_shared<CollectiveBackward>(name, std::move(transpose)), {x});
}

}  // namespace

Tensor copy_to_parallel_region(const Tensor& x, const ProcessGroup& tp) {
  return record("CopyToParallelRegionBackward", x, x.detach(),
                [tp](const Tensor& g) { return tpd::all_reduce_sum(tp, g); });
}

Tensor reduce_from_parallel_region(const Tensor& x, const ProcessGroup& tp) {
  return record("ReduceFromParallelRegionBackward", x, tpd::all_reduce_sum(tp, x),
                [](const Tensor& g) { return g.detach(); });
}

Tensor gather_from_parallel_region(const Tensor& x, int64_t dim, const ProcessGroup& tp) {
  return record("GatherFromParallelRegionBackward", x, tpd::all_gather_dim(tp, x, dim),
                [tp, dim](const Tensor& g) { return tpd::local_chunk(tp, g, dim); });
}

Tensor scatter_to_parallel_region(const Tensor& x, int64_t dim, const ProcessGroup& tp) {
  return record("ScatterToParallelRegionBackward", x, tpd::local_chunk(tp, x, dim),
                [tp, dim](const Tensor& g) { return tpd::all_gather_dim(tp, g, dim); });
}

Tensor all_gather(const Tensor& x, int64_t dim, const ProcessGroup& tp) {
  return record("AllGatherBackward", x, tpd::all_gather_dim(tp, x, dim),
                [tp, dim](const Tensor& g) { return tpd::reduce_scatter_dim(tp, g, dim); });
}

Tensor reduce_scatter(const Tensor& x, int64_t dim, const ProcessGroup& tp) {
  return record("ReduceScatterBackward", x, tpd::reduce_scatter_dim(tp, x, dim),
                [tp, dim](const Tensor& g) { return tpd::all_gather_dim(tp, g, dim); });
}

CollectiveFigures collective_figures() {
  const tpd::Counters& c = tpd::thread_counters();
  return {.calls = c.calls, .bytes = c.bytes, .seconds = c.seconds};
}

void reset_collective_figures() { tpd::thread_counters() = {}; }

}  // namespace tensorplay::distributed::tensor_parallel
