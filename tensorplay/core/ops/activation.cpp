// Unary elementwise ops through the kernel table's unary/unary_backward pair.
#include "tensorplay/core/ops/activation.h"

#include <stdexcept>
#include <string>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

const char* unary_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Relu:
      return "relu";
    case UnaryOp::Gelu:
      return "gelu";
    case UnaryOp::Tanh:
      return "tanh";
    case UnaryOp::Exp:
      return "exp";
    case UnaryOp::Log:
      return "log";
    case UnaryOp::Neg:
      return "neg";
    case UnaryOp::Sqrt:
      return "sqrt";
    case UnaryOp::Square:
      return "square";
    case UnaryOp::Sigmoid:
      return "sigmoid";
  }
  return "unary";
}

struct UnaryBackward : autograd::Node {
  UnaryOp op;
  Tensor x, y;
  const char* name() const override { return "UnaryBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>&) override {
    const Tensor& read = unary_grad_reads_output(op) ? y : x;
    if (op != UnaryOp::Neg && !read.defined())
      throw std::logic_error(std::string(name()) +
                             ": its saved tensors were released by an earlier backward; pass "
                             "retain_graph=true to run backward through this graph twice");
    Tensor gx = empty(g.shape(), {.device = g.device()});
    detail::backend_of(g).unary_backward(op, x.defined() ? x.data<float>() : nullptr,
                                         y.defined() ? y.data<float>() : nullptr, g.data<float>(),
                                         gx.data<float>(), g.numel());
    return {gx};
  }
  void release() override {
    x = Tensor();
    y = Tensor();
  }
  std::vector<Tensor*> saved_tensors() override { return {&x, &y}; }
};

Tensor unary_op(UnaryOp op, const Tensor& x) {
  const char* name = unary_name(op);
  detail::check_defined(name, x, "input");
  if (x.dtype() == DType::BFloat16)
    return detail::in_float32({x}, x.dtype(),
                              [op](const std::vector<Tensor>& in) { return unary_op(op, in[0]); });
  Tensor y = empty(x.shape(), {.device = x.device()});
  detail::backend_of(x).unary(op, x.data<float>(), y.data<float>(), x.numel());
  if (autograd::any_needs_grad({x})) {
    auto node = std::make_shared<UnaryBackward>();
    node->op = op;
    // Keep only the operand the derivative reads.
    if (unary_grad_reads_output(op))
      node->y = y.detach();
    else if (op != UnaryOp::Neg)
      node->x = x.detach();
    y = autograd::attach(y, node, {x});
  }
  return trace::record(name, {x}, y,
                       [op](const std::vector<Tensor>& in) { return unary_op(op, in[0]); });
}

}  // namespace

Tensor relu(const Tensor& x) { return unary_op(UnaryOp::Relu, x); }
Tensor gelu(const Tensor& x) { return unary_op(UnaryOp::Gelu, x); }
Tensor tanh(const Tensor& x) { return unary_op(UnaryOp::Tanh, x); }
Tensor exp(const Tensor& x) { return unary_op(UnaryOp::Exp, x); }
Tensor log(const Tensor& x) { return unary_op(UnaryOp::Log, x); }
Tensor sqrt(const Tensor& x) { return unary_op(UnaryOp::Sqrt, x); }
Tensor square(const Tensor& x) { return unary_op(UnaryOp::Square, x); }
Tensor sigmoid(const Tensor& x) { return unary_op(UnaryOp::Sigmoid, x); }

}  // namespace tensorplay
