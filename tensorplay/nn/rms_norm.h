// RMSNorm: root-mean-square normalisation over the last dimension with a learned scale, as
// torch.nn.RMSNorm(dim) and transformers' LlamaRMSNorm (the norm of Llama-style models).
#pragma once

#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// x / sqrt(mean(x^2) + eps) * weight over the last dimension (of size `dim`); no mean is
/// subtracted and there is no bias. Parameter `weight` [dim] (ones). Computed in float32 for
/// bfloat16 inputs, each op rounding once, as the tensors layer does for every op.
class RMSNormImpl : public Module {
 public:
  /// Throws std::invalid_argument unless dim > 0 and eps >= 0.
  explicit RMSNormImpl(int64_t dim, float eps = 1e-6f);
  /// Throws std::invalid_argument when x's last dimension is not `dim`.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "RMSNorm"; }
  std::string extra_repr() const override;

  Tensor weight;
  int64_t dim;
  float eps;
};
TENSORPLAY_MODULE(RMSNorm);

}  // namespace tensorplay::nn
