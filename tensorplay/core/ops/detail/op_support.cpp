// Shared op helpers.
#include "tensorplay/core/ops/detail/op_support.h"

#include <stdexcept>
#include <string>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/ops/conversion.h"

namespace tensorplay::detail {

void check_defined(const char* op, const Tensor& t, const char* what) {
  if (!t.defined())
    throw std::invalid_argument(std::string(op) + ": " + what + " is an undefined tensor");
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  if (a.device() != b.device())
    throw std::invalid_argument(std::string(op) + ": operands are on different devices (" +
                                to_string(a.device()) + " and " + to_string(b.device()) +
                                "); move one with .to(device)");
}

void check_float32(const char* op, const Tensor& t) {
  if (t.dtype() != DType::Float32)
    throw std::invalid_argument(std::string(op) + ": expected a float32 tensor, got " +
                                to_string(t.dtype()) + "; convert with .to(DType::Float32)");
}

bool any_bfloat16(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors)
    if (t.defined() && t.dtype() == DType::BFloat16) return true;
  return false;
}

DType promoted_dtype(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors)
    if (t.defined() && t.dtype() == DType::Float32) return DType::Float32;
  return any_bfloat16(tensors) ? DType::BFloat16 : DType::Float32;
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(std::string(op) + ": operands differ in dtype (" +
                                to_string(a.dtype()) + " and " + to_string(b.dtype()) +
                                "); convert one with .to(DType::...) or the module with "
                                "module->to(DType::...)");
}

Tensor in_float32(const std::vector<Tensor>& inputs, DType out_dtype,
                  const std::function<Tensor(const std::vector<Tensor>&)>& op) {
  std::vector<Tensor> wide;
  std::vector<std::pair<Tensor, Tensor>> widened;  // (float32 copy, bfloat16 original)
  wide.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    if (t.defined() && t.dtype() != DType::Float32) {
      wide.push_back(to_dtype(t, DType::Float32));
      widened.emplace_back(wide.back(), t);
    } else {
      wide.push_back(t);
    }
  }
  Tensor out = op(wide);
  // The op's node keeps the bfloat16 originals of the inputs it saved, not their float32 copies.
  if (out.grad_fn() && !widened.empty()) out.grad_fn()->narrow_saved(widened);
  return out.dtype() == out_dtype ? out : to_dtype(out, out_dtype);
}

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  size_t pad = out.size() - in.size();
  for (int64_t d = static_cast<int64_t>(in.size()) - 1; d >= 0; --d) {
    strides[d + pad] = in[d] == 1 ? 0 : stride;
    stride *= in[d];
  }
  return strides;
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  const Backend& b = backend_of(grad);
  Shape cur = grad.shape();
  Tensor t = grad;
  size_t pad = cur.size() - shape.size();
  // Reduce one dimension at a time (keeping it as size 1), then drop the leading ones.
  for (size_t d = 0; d < cur.size(); ++d) {
    int64_t target = d < pad ? 1 : shape[d - pad];
    if (cur[d] == target) continue;
    int64_t outer = numel_range(cur, 0, d);
    int64_t inner = numel_range(cur, d + 1, cur.size());
    Shape next = cur;
    next[d] = 1;
    Tensor out = empty(next, {.device = grad.device()});
    b.sum_dim(t.data<float>(), out.data<float>(), outer, cur[d], inner);
    t = out;
    cur = next;
  }
  return t.detach().reshape(shape);
}

Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  check_same_device(name, a, b);
  check_float32(name, a);
  check_float32(name, b);
  Shape out_shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = empty(out_shape, {.device = a.device()});
  std::vector<int64_t> as = broadcast_strides(a.shape(), out_shape);
  std::vector<int64_t> bs = broadcast_strides(b.shape(), out_shape);
  backend_of(a).binary(op, a.data<float>(), as.data(), b.data<float>(), bs.data(),
                       out.data<float>(), out_shape.data(), static_cast<int>(out_shape.size()));
  return out;
}

Tensor affine_kernel(const Tensor& x, float alpha, float beta) {
  check_float32("affine", x);
  Tensor out = empty(x.shape(), {.device = x.device()});
  backend_of(x).affine(x.data<float>(), out.data<float>(), x.numel(), alpha, beta);
  return out;
}

}  // namespace tensorplay::detail
