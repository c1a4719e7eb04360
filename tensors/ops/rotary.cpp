// rotary_embedding: one kernel that rotates each (c, c + D/2) pair of channels, run forward with
// the tables and backward as the adjoint (transposed) rotation.
#include "tensors/ops/rotary.h"

#include <stdexcept>
#include <string>

#include "tensors/autograd/node.h"
#include "tensors/ops/detail/op_support.h"
#include "tensors/ops/elementwise.h"
#include "tensors/ops/shape_ops.h"
#include "tensors/trace_hook.h"

namespace tensorplay {
namespace {

struct RotaryBackward : autograd::Node {
  Tensor cos, sin;
  int64_t outer = 0, time = 0, dim = 0;
  const char* name() const override { return "RotaryBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>& needed) override {
    std::vector<Tensor> out(needed.size());
    if (!needed[0]) return out;
    Tensor gx = empty(g.shape(), {.device = g.device()});
    detail::backend_of(g).rotary(g.data<float>(), cos.data<float>(), sin.data<float>(),
                                 gx.data<float>(), outer, time, dim, /*transpose=*/true);
    out[0] = gx;
    return out;
  }
  void release() override {
    cos = Tensor();
    sin = Tensor();
  }
  std::vector<Tensor*> saved_tensors() override { return {&cos, &sin}; }
};

void check_args(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  detail::check_defined("rotary_embedding", x, "input");
  detail::check_defined("rotary_embedding", cos, "cos");
  detail::check_defined("rotary_embedding", sin, "sin");
  detail::check_same_device("rotary_embedding", x, cos);
  detail::check_same_device("rotary_embedding", x, sin);
  if (x.dim() < 2 || x.size(-1) % 2 != 0)
    throw std::invalid_argument("rotary_embedding: expected input [..., T, D] with D even, got " +
                                to_string(x.shape()));
  const Shape table = {x.size(-2), x.size(-1)};
  if (cos.shape() != table || sin.shape() != table)
    throw std::invalid_argument("rotary_embedding: tables cos " + to_string(cos.shape()) +
                                " and sin " + to_string(sin.shape()) + " must both be " +
                                to_string(table) + " for input " + to_string(x.shape()));
  if (autograd::any_needs_grad({cos, sin}))
    throw std::invalid_argument(
        "rotary_embedding: cos and sin are constant tables and must not require a gradient "
        "(detach them)");
}

// The composed form, for devices without the fused kernels.
Tensor composed(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const int64_t last = x.dim() - 1, half = x.size(-1) / 2;
  Tensor rotated = cat({-narrow(x, last, half, half), narrow(x, last, 0, half)}, last);
  return x * cos + rotated * sin;
}

}  // namespace

Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  check_args(x, cos, sin);
  if (!x.device().is_cpu()) return composed(x, cos, sin);
  if (detail::any_bfloat16({x, cos, sin}))
    return detail::in_float32({x, cos, sin}, x.dtype(), [](const std::vector<Tensor>& in) {
      return rotary_embedding(in[0], in[1], in[2]);
    });
  const int64_t dim = x.size(-1), time = x.size(-2), outer = x.numel() / (dim * time);
  Tensor y = empty(x.shape(), {.device = x.device()});
  detail::backend_of(x).rotary(x.data<float>(), cos.data<float>(), sin.data<float>(),
                               y.data<float>(), outer, time, dim, /*transpose=*/false);
  std::vector<Tensor> inputs = {x, cos, sin};
  if (autograd::any_needs_grad({x})) {
    auto node = std::make_shared<RotaryBackward>();
    node->cos = cos.detach();
    node->sin = sin.detach();
    node->outer = outer;
    node->time = time;
    node->dim = dim;
    y = autograd::attach(y, node, inputs);
  }
  return trace::record("rotary_embedding", inputs, y, [](const std::vector<Tensor>& in) {
    return rotary_embedding(in[0], in[1], in[2]);
  });
}

}  // namespace tensorplay
