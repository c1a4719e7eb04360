// Two-argument loss functions.
#include "tensorplay/nn/functional.h"

#include "tensorplay/core/ops/loss.h"

namespace tensorplay::nn {

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  return tensorplay::mse_loss(input, target, Reduction::Mean);
}

}  // namespace tensorplay::nn
