// Loss functions in the two-argument form a schedule takes (`nn::mse_loss`), as in libtorch's
// torch::nn::functional.
#pragma once

#include "tensorplay/core/tensor.h"

namespace tensorplay::nn {

/// Mean squared error, mean over all elements.
Tensor mse_loss(const Tensor& input, const Tensor& target);

}  // namespace tensorplay::nn
