// Loss functions: mean squared error and cross entropy, with the usual reductions.
#pragma once

#include <cstdint>

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// How a loss reduces over elements.
enum class Reduction { Mean, Sum, None };

/// Mean squared error between `input` and `target` (same shape; target gets no gradient).
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

/// Cross entropy of `logits` [N, C] against class ids `targets` [N] (float32 holding integers;
/// no gradient). Rows whose target equals `ignore_index` are skipped: Mean divides by the number
/// of other rows (a loss of 0, with zero gradients, when every row is ignored); None gives [N]
/// with 0 on ignored rows. A target outside [0, C) is an error naming it.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::Mean);

}  // namespace tensorplay
