// layer_norm: one kernel for the forward (saving per-row mean and 1/std), one for the input
// gradient and one for the weight/bias gradients, so I and W parts of a split backward are apart.
#include "tensorplay/core/ops/normalization.h"

#include <stdexcept>
#include <string>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

struct LayerNormBackward : autograd::Node {
  Tensor x, weight, mean, rstd;
  int64_t rows = 0, cols = 0;
  bool has_weight = false, has_bias = false;
  const char* name() const override { return "LayerNormBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>& needed) override {
    std::vector<Tensor> out(needed.size());
    const Backend& be = detail::backend_of(g);
    if (needed[0]) {
      Tensor gx = empty(x.shape(), {.device = g.device()});
      be.layer_norm_backward_input(x.data<float>(), has_weight ? weight.data<float>() : nullptr,
                                   mean.data<float>(), rstd.data<float>(), g.data<float>(),
                                   gx.data<float>(), rows, cols);
      out[0] = gx;
    }
    size_t bias_slot = has_weight ? 2 : 1;
    bool want_w = has_weight && needed[1];
    bool want_b = has_bias && needed[bias_slot];
    if (want_w || want_b) {
      Tensor gw = want_w ? empty({cols}, {.device = g.device()}) : Tensor();
      Tensor gb = want_b ? empty({cols}, {.device = g.device()}) : Tensor();
      be.layer_norm_backward_params(x.data<float>(), mean.data<float>(), rstd.data<float>(),
                                    g.data<float>(), want_w ? gw.data<float>() : nullptr,
                                    want_b ? gb.data<float>() : nullptr, rows, cols);
      if (want_w) out[1] = gw;
      if (want_b) out[bias_slot] = gb;
    }
    return out;
  }
  void release() override {
    x = Tensor();
    weight = Tensor();
    mean = Tensor();
    rstd = Tensor();
  }
  std::vector<Tensor*> saved_tensors() override { return {&x, &weight}; }
};

void check_param(const Tensor& x, const Tensor& p, int64_t size, const char* what) {
  if (!p.defined()) return;
  detail::check_same_device("layer_norm", x, p);
  if (p.dim() != 1 || p.shape()[0] != size)
    throw std::invalid_argument(std::string("layer_norm: ") + what + " of shape " +
                                to_string(p.shape()) + " does not match normalized size " +
                                std::to_string(size) + " (expected [" + std::to_string(size) +
                                "])");
}

}  // namespace

Tensor layer_norm(const Tensor& x, int64_t normalized_size, const Tensor& weight,
                  const Tensor& bias, float eps) {
  detail::check_defined("layer_norm", x, "input");
  if (detail::any_bfloat16({x, weight, bias}))
    return detail::in_float32({x, weight, bias}, x.dtype(),
                              [normalized_size, eps](const std::vector<Tensor>& in) {
                                return layer_norm(in[0], normalized_size, in[1], in[2], eps);
                              });
  if (x.dim() < 1 || x.shape().back() != normalized_size || normalized_size <= 0)
    throw std::invalid_argument("layer_norm: input of shape " + to_string(x.shape()) +
                                " does not end in the normalized size " +
                                std::to_string(normalized_size));
  check_param(x, weight, normalized_size, "weight");
  check_param(x, bias, normalized_size, "bias");
  int64_t cols = normalized_size, rows = x.numel() / cols;
  Tensor y = empty(x.shape(), {.device = x.device()});
  Tensor mean = empty({rows}, {.device = x.device()});
  Tensor rstd = empty({rows}, {.device = x.device()});
  detail::backend_of(x).layer_norm(x.data<float>(),
                                   weight.defined() ? weight.data<float>() : nullptr,
                                   bias.defined() ? bias.data<float>() : nullptr, y.data<float>(),
                                   mean.data<float>(), rstd.data<float>(), rows, cols, eps);
  std::vector<Tensor> inputs = {x};
  if (weight.defined()) inputs.push_back(weight);
  if (bias.defined()) inputs.push_back(bias);
  if (autograd::any_needs_grad(inputs)) {
    auto node = std::make_shared<LayerNormBackward>();
    node->x = x.detach();
    if (weight.defined()) node->weight = weight.detach();
    node->mean = mean;
    node->rstd = rstd;
    node->rows = rows;
    node->cols = cols;
    node->has_weight = weight.defined();
    node->has_bias = bias.defined();
    y = autograd::attach(y, node, inputs);
  }
  bool has_weight = weight.defined(), has_bias = bias.defined();
  return trace::record("layer_norm", inputs, y,
                       [normalized_size, eps, has_weight, has_bias](const std::vector<Tensor>& in) {
                         Tensor w = has_weight ? in[1] : Tensor();
                         Tensor b = has_bias ? in[has_weight ? 2 : 1] : Tensor();
                         return layer_norm(in[0], normalized_size, w, b, eps);
                       });
}

}  // namespace tensorplay
