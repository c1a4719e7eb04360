// Layer normalisation over the last dimension, with optional elementwise weight and bias.
#pragma once

#include <cstdint>

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// (x - mean) / sqrt(var + eps) * weight + bias over the last dimension of x, whose size must be
/// `normalized_size`. weight and bias ([normalized_size]) may be undefined. Their gradients are
/// computed only when requested, each independently (a split backward equals a full one).
Tensor layer_norm(const Tensor& x, int64_t normalized_size, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), float eps = 1e-5f);

}  // namespace tensorplay
