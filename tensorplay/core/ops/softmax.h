// softmax and log_softmax along one dimension, numerically stable (the row maximum is subtracted
// before exponentiating).
#pragma once

#include <cstdint>

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// exp(x) / sum(exp(x)) along `dim` (negative counts from the end).
Tensor softmax(const Tensor& x, int64_t dim);
/// x - log(sum(exp(x))) along `dim`.
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace tensorplay
