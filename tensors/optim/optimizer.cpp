// Optimizer base.
#include "tensors/optim/optimizer.h"

#include <stdexcept>

namespace tensorplay::optim {

Optimizer::Optimizer(std::vector<Tensor> parameters) : parameters_(std::move(parameters)) {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!parameters_[i].defined() || !parameters_[i].is_leaf())
      throw std::invalid_argument("optimizer parameter " + std::to_string(i) +
                                  " is undefined or not a leaf tensor");
  }
}

void Optimizer::zero_grad() {
  for (Tensor& p : parameters_) p.set_grad(Tensor());
}

}  // namespace tensorplay::optim
