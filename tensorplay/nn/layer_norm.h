// LayerNorm: normalisation over the last dimension with a learned scale and shift, as
// torch.nn.LayerNorm(dim).
#pragma once

#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// (x - mean) / sqrt(var + eps) * weight + bias over the last dimension (of size `dim`).
/// Parameters `weight` (ones) and `bias` (zeros), both [dim].
class LayerNormImpl : public Module {
 public:
  explicit LayerNormImpl(int64_t dim, float eps = 1e-5f);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;

  Tensor weight;
  Tensor bias;
  int64_t dim;
  float eps;
};
TENSORPLAY_MODULE(LayerNorm);

}  // namespace tensorplay::nn
