// Moving tensors between devices and element types, with gradients flowing back the same way.
#pragma once

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// Copy of `x` on `device`; the gradient is copied back to x's device.
Tensor to_device(const Tensor& x, Device device);
/// Copy of `x` as `dtype`; the gradient is converted back to x's dtype.
Tensor to_dtype(const Tensor& x, DType dtype);

}  // namespace tensorplay
