// sum and mean; their gradients broadcast the output gradient back over the reduced dimension.
#include "tensorplay/core/ops/reduction.h"

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

Tensor sum_kernel(const Tensor& x, int64_t outer, int64_t reduce, int64_t inner,
                  const Shape& out_shape) {
  Tensor out = empty(out_shape, {.device = x.device()});
  detail::backend_of(x).sum_dim(x.data<float>(), out.data<float>(), outer, reduce, inner);
  return out;
}

struct SumBackward : autograd::Node {
  Shape input_shape, kept_shape;  // kept_shape: the output with the reduced dims as size 1
  float scale = 1.0f;             // 1/count for mean
  const char* name() const override { return "SumBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>&) override {
    Tensor gk = g.detach().reshape(kept_shape);
    Tensor zero = zeros(input_shape, {.device = g.device()});
    Tensor out = detail::binary_kernel(BinaryOp::Add, zero, gk, "sum_backward");
    if (scale != 1.0f) out = detail::affine_kernel(out, scale, 0.0f);
    return {out};
  }
};

Tensor reduce(const Tensor& x, int64_t dim, bool keepdim, bool all, bool is_mean) {
  const char* name = is_mean ? "mean" : "sum";
  detail::check_defined(name, x, "input");
  if (x.dtype() == DType::BFloat16)
    return detail::in_float32({x}, x.dtype(), [=](const std::vector<Tensor>& in) {
      return reduce(in[0], dim, keepdim, all, is_mean);
    });
  Shape out_shape, kept_shape;
  int64_t outer = 1, reduce_n = x.numel(), inner = 1;
  if (all) {
    kept_shape = Shape(x.dim(), 1);
  } else {
    dim = wrap_dim(dim, x.dim(), name);
    outer = numel_range(x.shape(), 0, dim);
    reduce_n = x.shape()[dim];
    inner = numel_range(x.shape(), dim + 1, x.dim());
    kept_shape = x.shape();
    kept_shape[dim] = 1;
    out_shape = keepdim ? kept_shape : x.shape();
    if (!keepdim) out_shape.erase(out_shape.begin() + dim);
  }
  Tensor out = sum_kernel(x, outer, reduce_n, inner, out_shape);
  float scale = is_mean ? 1.0f / static_cast<float>(reduce_n) : 1.0f;
  if (is_mean) out = detail::affine_kernel(out, scale, 0.0f);
  auto node = std::make_shared<SumBackward>();
  node->input_shape = x.shape();
  node->kept_shape = kept_shape;
  node->scale = scale;
  out = autograd::attach(out, node, {x});
  return trace::record(name, {x}, out, [dim, keepdim, all, is_mean](const std::vector<Tensor>& in) {
    return reduce(in[0], dim, keepdim, all, is_mean);
  });
}

}  // namespace

Tensor sum(const Tensor& x) { return reduce(x, 0, false, true, false); }
Tensor sum(const Tensor& x, int64_t dim, bool keepdim) {
  return reduce(x, dim, keepdim, false, false);
}
Tensor mean(const Tensor& x) { return reduce(x, 0, false, true, true); }
Tensor mean(const Tensor& x, int64_t dim, bool keepdim) {
  return reduce(x, dim, keepdim, false, true);
}

}  // namespace tensorplay
