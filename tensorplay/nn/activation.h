// Activation modules wrapping the elementwise ops.
#pragma once

#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// max(x, 0).
class ReLUImpl : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU"; }
};
TENSORPLAY_MODULE(ReLU);

/// GELU (tanh approximation).
class GELUImpl : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GELU"; }
};
TENSORPLAY_MODULE(GELU);

/// tanh(x).
class TanhImpl : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Tanh"; }
};
TENSORPLAY_MODULE(Tanh);

}  // namespace tensorplay::nn
