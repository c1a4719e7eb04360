// Dropout: zeroes elements at random during training and scales the rest by 1/(1-p).
#pragma once

#include "tensorplay/core/random.h"
#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// Keeps element i (scaled by 1/(1-p)) when the i-th draw `uniform()` of the generator (the
/// default generator when null) is >= p, zeroes it otherwise; so a given generator state gives
/// the same mask on every device. Identity (x itself) when !training or p == 0; zeros when p == 1.
/// A traced dropout replays with the same generator pointer, which must outlive the trace.
Tensor dropout(const Tensor& x, float p, bool training, Generator* generator = nullptr);

}  // namespace tensorplay
