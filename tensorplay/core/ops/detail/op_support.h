// Helpers shared by op implementations: argument checks, broadcasting strides, reducing a
// broadcast gradient back to an input's shape. Internal to the tensors layer.
#pragma once

#include <functional>
#include <vector>

#include "tensorplay/core/backend.h"
#include "tensorplay/core/tensor.h"

namespace tensorplay::detail {

/// Kernel table of a tensor's device.
inline const Backend& backend_of(const Tensor& t) { return backend_for(t.device()); }

/// Throws naming the op when a tensor is undefined.
void check_defined(const char* op, const Tensor& t, const char* what);
/// Throws naming the op and both devices when they differ.
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
/// Throws naming the op when the tensor is not float32 (what the float32 kernels take).
void check_float32(const char* op, const Tensor& t);

/// Whether any defined tensor among `tensors` holds bfloat16.
bool any_bfloat16(const std::vector<Tensor>& tensors);
/// bfloat16 when every defined tensor is bfloat16, else float32 (PyTorch's promotion for the two).
DType promoted_dtype(const std::vector<Tensor>& tensors);
/// Throws naming the op when two operands of a product differ in dtype (as PyTorch does).
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);

/// bfloat16 compute as PyTorch does it for ops without a bfloat16 kernel ("opmath"): `op` runs on
/// float32 copies of the bfloat16 tensors among `inputs` and its result is rounded to
/// `out_dtype`. The conversions are autograd ops, so gradients reach bfloat16 tensors as
/// bfloat16, and a split backward still equals a full one bit for bit.
Tensor in_float32(const std::vector<Tensor>& inputs, DType out_dtype,
                  const std::function<Tensor(const std::vector<Tensor>&)>& op);

/// Element strides of `in` broadcast to `out` (0 where broadcast), padded to out's rank.
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out);

/// Sums `grad` (shaped like a broadcast result) down to `shape`. No autograd.
Tensor sum_to(const Tensor& grad, const Shape& shape);

/// out = a op b with broadcasting, no autograd.
Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, const char* name);

/// x * alpha + beta, no autograd.
Tensor affine_kernel(const Tensor& x, float alpha, float beta);

}  // namespace tensorplay::detail
