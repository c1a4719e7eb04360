// Stochastic gradient descent with momentum, dampening, Nesterov and weight decay, following
// PyTorch's torch.optim.SGD update rule step for step.
#pragma once

#include "tensorplay/optim/optimizer.h"

namespace tensorplay::optim {

/// SGD hyper-parameters (PyTorch's names and defaults, lr aside).
struct SGDOptions {
  float lr = 0.01f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

/// Per parameter, with g its gradient:
///   g = g + weight_decay * p                       (when weight_decay != 0)
///   b = g on the first step, else b = momentum * b + (1 - dampening) * g   (when momentum != 0)
///   g = nesterov ? g + momentum * b : b
///   p = p - lr * g
class SGD : public Optimizer {
 public:
  /// Throws std::invalid_argument on a negative lr/momentum/weight_decay, or nesterov without
  /// momentum or with dampening (as PyTorch).
  SGD(std::vector<Tensor> parameters, SGDOptions options);
  void step() override;
  std::string type_name() const override { return "SGD"; }
  const SGDOptions& options() const { return options_; }
  SGDOptions& options() { return options_; }

  /// Keys: options.{lr,momentum,dampening,weight_decay,nesterov}, `state.<i>.momentum_buffer`.
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& dict) override;

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_buffers_;
};

}  // namespace tensorplay::optim
