// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_.
#pragma once

#include <vector>

#include "tensorplay/core/tensor.h"

namespace tensorplay::optim {

/// Scales the gradients of `parameters` in place so that their global L2 norm (the norm of all
/// gradients concatenated) is at most `max_norm`, and returns that norm as it was before
/// clipping. The scale is max_norm / (norm + 1e-6), applied only when below 1, as in PyTorch.
/// Parameters without a gradient are skipped. Throws std::invalid_argument when max_norm < 0.
float clip_grad_norm(const std::vector<Tensor>& parameters, float max_norm);

}  // namespace tensorplay::optim
