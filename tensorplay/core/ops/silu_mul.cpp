// silu_mul: SwiGLU's silu(gate) * up with one forward kernel and one backward kernel for both
// gradients (the sigmoid is recomputed there rather than saved).
#include "tensorplay/core/ops/silu_mul.h"

#include <stdexcept>
#include <string>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/ops/activation.h"
#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/ops/elementwise.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

struct SiluMulBackward : autograd::Node {
  Tensor gate, up;
  const char* name() const override { return "SiluMulBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>& needed) override {
    std::vector<Tensor> out(needed.size());
    Tensor ggate = needed[0] ? empty(gate.shape(), {.device = g.device()}) : Tensor();
    Tensor gup = needed[1] ? empty(up.shape(), {.device = g.device()}) : Tensor();
    if (!needed[0] && !needed[1]) return out;
    detail::backend_of(g).silu_mul_backward(gate.data<float>(), up.data<float>(), g.data<float>(),
                                            needed[0] ? ggate.data<float>() : nullptr,
                                            needed[1] ? gup.data<float>() : nullptr, gate.numel());
    out[0] = ggate;
    out[1] = gup;
    return out;
  }
  void release() override {
    gate = Tensor();
    up = Tensor();
  }
  std::vector<Tensor*> saved_tensors() override { return {&gate, &up}; }
};

}  // namespace

Tensor silu_mul(const Tensor& gate, const Tensor& up) {
  detail::check_defined("silu_mul", gate, "gate");
  detail::check_defined("silu_mul", up, "up");
  detail::check_same_device("silu_mul", gate, up);
  if (gate.shape() != up.shape())
    throw std::invalid_argument("silu_mul: gate of shape " + to_string(gate.shape()) +
                                " and up of shape " + to_string(up.shape()) +
                                " differ (they must match; broadcast them first)");
  if (!gate.device().is_cpu()) return gate * sigmoid(gate) * up;
  if (detail::any_bfloat16({gate, up}))
    return detail::in_float32({gate, up}, detail::promoted_dtype({gate, up}),
                              [](const std::vector<Tensor>& in) { return silu_mul(in[0], in[1]); });
  Tensor y = empty(gate.shape(), {.device = gate.device()});
  detail::backend_of(gate).silu_mul(gate.data<float>(), up.data<float>(), y.data<float>(),
                                    gate.numel());
  std::vector<Tensor> inputs = {gate, up};
  if (autograd::any_needs_grad(inputs)) {
    auto node = std::make_shared<SiluMulBackward>();
    node->gate = gate.detach();
    node->up = up.detach();
    y = autograd::attach(y, node, inputs);
  }
  return trace::record("silu_mul", inputs, y,
                       [](const std::vector<Tensor>& in) { return silu_mul(in[0], in[1]); });
}

}  // namespace tensorplay
