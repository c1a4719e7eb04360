// Loss functions.
#pragma once

#include "tensors/tensor.h"

namespace tensorplay {

/// How a loss reduces over elements.
enum class Reduction { Mean, Sum, None };

/// Mean squared error between `input` and `target` (same shape; target gets no gradient).
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

}  // namespace tensorplay
