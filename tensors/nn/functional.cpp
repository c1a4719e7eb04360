// Two-argument loss functions.
#include "tensors/nn/functional.h"

#include "tensors/ops/loss.h"

namespace tensorplay::nn {

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  return tensorplay::mse_loss(input, target, Reduction::Mean);
}

}  // namespace tensorplay::nn
