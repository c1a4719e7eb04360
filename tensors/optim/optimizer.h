// Optimizer base: holds parameters, clears their gradients, and applies an update per step.
#pragma once

#include <vector>

#include "tensors/tensor.h"

namespace tensorplay::optim {

/// Updates a list of parameters from their accumulated gradients.
class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> parameters);
  virtual ~Optimizer() = default;
  /// One update from the current gradients (parameters without a gradient are skipped).
  virtual void step() = 0;
  /// Clears every parameter's gradient.
  void zero_grad();
  const std::vector<Tensor>& parameters() const { return parameters_; }

 protected:
  std::vector<Tensor> parameters_;
};

}  // namespace tensorplay::optim
