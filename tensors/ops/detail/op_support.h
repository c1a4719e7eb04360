// Helpers shared by op implementations: argument checks, broadcasting strides, reducing a
// broadcast gradient back to an input's shape. Internal to tensors/.
#pragma once

#include <vector>

#include "tensors/backend.h"
#include "tensors/tensor.h"

namespace tensorplay::detail {

/// Kernel table of a tensor's device.
inline const Backend& backend_of(const Tensor& t) { return backend_for(t.device()); }

/// Throws naming the op when a tensor is undefined.
void check_defined(const char* op, const Tensor& t, const char* what);
/// Throws naming the op and both devices when they differ.
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
/// Throws naming the op when the tensor is not float32 (compute ops run in float32 on the CPU).
void check_float32(const char* op, const Tensor& t);

/// Element strides of `in` broadcast to `out` (0 where broadcast), padded to out's rank.
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out);

/// Sums `grad` (shaped like a broadcast result) down to `shape`. No autograd.
Tensor sum_to(const Tensor& grad, const Shape& shape);

/// out = a op b with broadcasting, no autograd.
Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, const char* name);

/// x * alpha + beta, no autograd.
Tensor affine_kernel(const Tensor& x, float alpha, float beta);

}  // namespace tensorplay::detail
