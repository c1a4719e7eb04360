// Elementwise binary ops: broadcasting in forward, gradients summed back to each input's shape.
#include "tensorplay/core/ops/elementwise.h"

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

using detail::binary_kernel;
using detail::sum_to;

struct BinaryBackward : autograd::Node {
  BinaryOp op;
  Tensor a, b;  // saved only when the gradient formula needs them
  Shape a_shape, b_shape;
  const char* name() const override {
    switch (op) {
      case BinaryOp::Add:
        return "AddBackward";
      case BinaryOp::Sub:
        return "SubBackward";
      case BinaryOp::Mul:
        return "MulBackward";
      case BinaryOp::Div:
        return "DivBackward";
    }
    return "BinaryBackward";
  }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>& needed) override {
    std::vector<Tensor> out(2);
    switch (op) {
      case BinaryOp::Add:
        if (needed[0]) out[0] = sum_to(g, a_shape);
        if (needed[1]) out[1] = sum_to(g, b_shape);
        break;
      case BinaryOp::Sub:
        if (needed[0]) out[0] = sum_to(g, a_shape);
        if (needed[1]) out[1] = sum_to(detail::affine_kernel(g, -1.0f, 0.0f), b_shape);
        break;
      case BinaryOp::Mul:
        if (needed[0]) out[0] = sum_to(binary_kernel(BinaryOp::Mul, g, b, "mul"), a_shape);
        if (needed[1]) out[1] = sum_to(binary_kernel(BinaryOp::Mul, g, a, "mul"), b_shape);
        break;
      case BinaryOp::Div:
        if (needed[0]) out[0] = sum_to(binary_kernel(BinaryOp::Div, g, b, "div"), a_shape);
        if (needed[1]) {
          // d(a/b)/db = -a / b^2
          Tensor ab2 =
              binary_kernel(BinaryOp::Div, binary_kernel(BinaryOp::Div, a, b, "div"), b, "div");
          out[1] = sum_to(
              detail::affine_kernel(binary_kernel(BinaryOp::Mul, g, ab2, "mul"), -1.0f, 0.0f),
              b_shape);
        }
        break;
    }
    return out;
  }
  void release() override {
    a = Tensor();
    b = Tensor();
  }
  std::vector<Tensor*> saved_tensors() override { return {&a, &b}; }
};

Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  detail::check_defined(name, a, "first operand");
  detail::check_defined(name, b, "second operand");
  if (detail::any_bfloat16({a, b}))
    return detail::in_float32(
        {a, b}, detail::promoted_dtype({a, b}),
        [op, name](const std::vector<Tensor>& in) { return binary_op(op, in[0], in[1], name); });
  Tensor out = binary_kernel(op, a, b, name);
  if (autograd::any_needs_grad({a, b})) {
    auto node = std::make_shared<BinaryBackward>();
    node->op = op;
    node->a_shape = a.shape();
    node->b_shape = b.shape();
    if (op == BinaryOp::Mul || op == BinaryOp::Div) {
      node->a = a.detach();
      node->b = b.detach();
    }
    out = autograd::attach(out, node, {a, b});
  }
  return trace::record(name, {a, b}, out, [op, name](const std::vector<Tensor>& in) {
    return binary_op(op, in[0], in[1], name);
  });
}

struct AffineBackward : autograd::Node {
  float alpha;
  const char* name() const override { return "AffineBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>&) override {
    return {detail::affine_kernel(g, alpha, 0.0f)};
  }
};

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Add, a, b, "add"); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Sub, a, b, "sub"); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Mul, a, b, "mul"); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Div, a, b, "div"); }

Tensor affine(const Tensor& x, float alpha, float beta) {
  detail::check_defined("affine", x, "input");
  if (x.dtype() == DType::BFloat16)
    return detail::in_float32({x}, x.dtype(), [alpha, beta](const std::vector<Tensor>& in) {
      return affine(in[0], alpha, beta);
    });
  Tensor out = detail::affine_kernel(x, alpha, beta);
  auto node = std::make_shared<AffineBackward>();
  node->alpha = alpha;
  out = autograd::attach(out, node, {x});
  return trace::record("affine", {x}, out, [alpha, beta](const std::vector<Tensor>& in) {
    return affine(in[0], alpha, beta);
  });
}

Tensor neg(const Tensor& x) { return affine(x, -1.0f, 0.0f); }

}  // namespace tensorplay
