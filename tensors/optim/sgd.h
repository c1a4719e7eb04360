// Stochastic gradient descent with optional momentum and weight decay (PyTorch's update rule).
#pragma once

#include "tensors/optim/optimizer.h"

namespace tensorplay::optim {

/// SGD hyper-parameters.
struct SGDOptions {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
};

/// p -= lr * (g + wd p), with momentum buffers b = momentum b + g' when momentum > 0.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> parameters, SGDOptions options);
  void step() override;
  const SGDOptions& options() const { return options_; }

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_buffers_;
};

}  // namespace tensorplay::optim
