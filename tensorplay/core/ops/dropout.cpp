// dropout: the mask {0, 1/(1-p)} is drawn on the host from the generator (as every random tensor
// is), multiplied in on the device, and saved for the backward.
#include "tensorplay/core/ops/dropout.h"

#include <stdexcept>
#include <string>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

struct DropoutBackward : autograd::Node {
  Tensor mask;
  const char* name() const override { return "DropoutBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>&) override {
    return {detail::binary_kernel(BinaryOp::Mul, g, mask, "dropout_backward")};
  }
  void release() override { mask = Tensor(); }
};

}  // namespace

Tensor dropout(const Tensor& x, float p, bool training, Generator* generator) {
  detail::check_defined("dropout", x, "input");
  if (!(p >= 0.0f && p <= 1.0f))
    throw std::invalid_argument("dropout: probability " + std::to_string(p) + " is outside [0, 1]");
  if (!training || p == 0.0f) return x;
  if (x.dtype() == DType::BFloat16)
    return detail::in_float32({x}, x.dtype(), [p, generator](const std::vector<Tensor>& in) {
      return dropout(in[0], p, true, generator);
    });
  Generator& gen = generator ? *generator : default_generator();
  std::vector<float> keep(x.numel());
  float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  {
    auto lock = gen.lock();  // stages on other threads may draw from the same generator
    for (float& m : keep) m = gen.uniform() >= p ? scale : 0.0f;
  }
  Tensor mask = from_vector(keep, x.shape(), {.device = x.device()});
  Tensor out = detail::binary_kernel(BinaryOp::Mul, x, mask, "dropout");
  if (autograd::any_needs_grad({x})) {
    auto node = std::make_shared<DropoutBackward>();
    node->mask = mask;
    out = autograd::attach(out, node, {x});
  }
  return trace::record("dropout", {x}, out,
                       [p, training, generator](const std::vector<Tensor>& in) {
                         return dropout(in[0], p, training, generator);
                       });
}

}  // namespace tensorplay
