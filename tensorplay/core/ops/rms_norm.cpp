// rms_norm: one kernel for the forward (saving the per-row 1/rms), one for the input gradient and
// one for the weight gradient, so the I and W parts of a split backward are apart.
#include "tensorplay/core/ops/rms_norm.h"

#include <stdexcept>
#include <string>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/ops/activation.h"
#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/ops/elementwise.h"
#include "tensorplay/core/ops/reduction.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

struct RMSNormBackward : autograd::Node {
  Tensor x, weight, rstd;
  int64_t rows = 0, cols = 0;
  bool has_weight = false;
  const char* name() const override { return "RMSNormBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>& needed) override {
    std::vector<Tensor> out(needed.size());
    const Backend& be = detail::backend_of(g);
    if (needed[0]) {
      Tensor gx = empty(x.shape(), {.device = g.device()});
      be.rms_norm_backward_input(x.data<float>(), has_weight ? weight.data<float>() : nullptr,
                                 rstd.data<float>(), g.data<float>(), gx.data<float>(), rows, cols);
      out[0] = gx;
    }
    if (has_weight && needed[1]) {
      Tensor gw = empty({cols}, {.device = g.device()});
      be.rms_norm_backward_params(x.data<float>(), rstd.data<float>(), g.data<float>(),
                                  gw.data<float>(), rows, cols);
      out[1] = gw;
    }
    return out;
  }
  void release() override {
    x = Tensor();
    weight = Tensor();
    rstd = Tensor();
  }
  std::vector<Tensor*> saved_tensors() override { return {&x, &weight}; }
};

void check_args(const Tensor& x, int64_t size, const Tensor& weight, float eps) {
  if (x.dim() < 1 || size <= 0 || x.shape().back() != size)
    throw std::invalid_argument("rms_norm: input of shape " + to_string(x.shape()) +
                                " does not end in the normalized size " + std::to_string(size));
  if (!(eps >= 0.0f))
    throw std::invalid_argument("rms_norm: eps must be >= 0, got " + std::to_string(eps));
  if (!weight.defined()) return;
  detail::check_same_device("rms_norm", x, weight);
  if (weight.dim() != 1 || weight.shape()[0] != size)
    throw std::invalid_argument("rms_norm: weight of shape " + to_string(weight.shape()) +
                                " does not match normalized size " + std::to_string(size) +
                                " (expected [" + std::to_string(size) + "])");
}

// The composed form (the module's former body), for devices without the fused kernels.
Tensor composed(const Tensor& x, const Tensor& weight, float eps) {
  Tensor y = x / sqrt(mean(square(x), -1, /*keepdim=*/true) + eps);
  return weight.defined() ? y * weight : y;
}

}  // namespace

Tensor rms_norm(const Tensor& x, int64_t normalized_size, const Tensor& weight, float eps) {
  detail::check_defined("rms_norm", x, "input");
  check_args(x, normalized_size, weight, eps);
  if (!x.device().is_cpu()) return composed(x, weight, eps);
  if (detail::any_bfloat16({x, weight}))
    return detail::in_float32({x, weight}, x.dtype(),
                              [normalized_size, eps](const std::vector<Tensor>& in) {
                                return rms_norm(in[0], normalized_size, in[1], eps);
                              });
  const int64_t cols = normalized_size, rows = x.numel() / cols;
  Tensor y = empty(x.shape(), {.device = x.device()});
  Tensor rstd = empty({rows}, {.device = x.device()});
  detail::backend_of(x).rms_norm(x.data<float>(), weight.defined() ? weight.data<float>() : nullptr,
                                 y.data<float>(), rstd.data<float>(), rows, cols, eps);
  std::vector<Tensor> inputs = {x};
  if (weight.defined()) inputs.push_back(weight);
  if (autograd::any_needs_grad(inputs)) {
    auto node = std::make_shared<RMSNormBackward>();
    node->x = x.detach();
    if (weight.defined()) node->weight = weight.detach();
    node->rstd = rstd;
    node->rows = rows;
    node->cols = cols;
    node->has_weight = weight.defined();
    y = autograd::attach(y, node, inputs);
  }
  const bool has_weight = weight.defined();
  return trace::record(
      "rms_norm", inputs, y, [normalized_size, eps, has_weight](const std::vector<Tensor>& in) {
        return rms_norm(in[0], normalized_size, has_weight ? in[1] : Tensor(), eps);
      });
}

}  // namespace tensorplay
