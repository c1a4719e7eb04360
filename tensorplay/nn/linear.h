// Linear: y = x W^T + b, initialised as PyTorch does (uniform in +-1/sqrt(in_features)).
#pragma once

#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// Options of a Linear layer.
struct LinearOptions {
  bool bias = true;
};

/// Fully connected layer with parameters `weight` [out, in] and `bias` [out].
class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, LinearOptions options = {});
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;

  Tensor weight;
  Tensor bias;
  int64_t in_features, out_features;
};
TENSORPLAY_MODULE(Linear);

}  // namespace tensorplay::nn
