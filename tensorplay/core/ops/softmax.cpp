// softmax and log_softmax: the tensor is viewed as [outer, n, inner] around the reduced dimension,
// so no transpose is needed; the backward reads only the saved output.
#include "tensorplay/core/ops/softmax.h"

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

struct SoftmaxBackward : autograd::Node {
  Tensor y;
  int64_t outer = 1, n = 1, inner = 1;
  bool log = false;
  const char* name() const override { return log ? "LogSoftmaxBackward" : "SoftmaxBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>&) override {
    Tensor gx = empty(g.shape(), {.device = g.device()});
    detail::backend_of(g).softmax_backward(y.data<float>(), g.data<float>(), gx.data<float>(),
                                           outer, n, inner, log);
    return {gx};
  }
  void release() override { y = Tensor(); }
};

Tensor softmax_op(const Tensor& x, int64_t dim, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  detail::check_defined(name, x, "input");
  if (x.dtype() == DType::BFloat16)
    return detail::in_float32({x}, x.dtype(), [dim, log](const std::vector<Tensor>& in) {
      return softmax_op(in[0], dim, log);
    });
  int64_t d = wrap_dim(dim, x.dim(), name);
  int64_t outer = 1, n = 1, inner = 1;
  if (x.dim() > 0) {
    outer = numel_range(x.shape(), 0, d);
    n = x.shape()[d];
    inner = numel_range(x.shape(), d + 1, x.dim());
  }
  Tensor y = empty(x.shape(), {.device = x.device()});
  if (x.numel() > 0)
    detail::backend_of(x).softmax(x.data<float>(), y.data<float>(), outer, n, inner, log);
  if (autograd::any_needs_grad({x})) {
    auto node = std::make_shared<SoftmaxBackward>();
    node->y = y.detach();
    node->outer = outer;
    node->n = n;
    node->inner = inner;
    node->log = log;
    y = autograd::attach(y, node, {x});
  }
  return trace::record(name, {x}, y, [dim, log](const std::vector<Tensor>& in) {
    return softmax_op(in[0], dim, log);
  });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op(x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op(x, dim, true); }

}  // namespace tensorplay
