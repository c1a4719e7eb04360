// matmul and linear with their gradients, in float32 or in bfloat16 (accumulated in float32). Each
// input's gradient is one gemm of its own, so the weight gradient is the same computation in a full
// and in a split (I then W) backward.
#include "tensorplay/core/ops/linear_algebra.h"

#include <stdexcept>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

struct MatmulPlan {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  bool b_batched = false;  // b has its own matrices per batch entry
  Shape out_shape;
};

MatmulPlan plan_matmul(const Tensor& a, const Tensor& b) {
  if (a.dim() < 1 || b.dim() < 2)
    throw std::invalid_argument("matmul: needs a of rank >= 1 and b of rank >= 2, got " +
                                to_string(a.shape()) + " and " + to_string(b.shape()));
  MatmulPlan p;
  p.k = a.shape().back();
  p.n = b.shape().back();
  if (b.shape()[b.dim() - 2] != p.k)
    throw std::invalid_argument("matmul: inner dimensions differ: " + to_string(a.shape()) + " x " +
                                to_string(b.shape()));
  if (b.dim() == 2) {
    p.m = a.numel() / std::max<int64_t>(p.k, 1);
    if (p.k == 0) p.m = numel_range(a.shape(), 0, a.dim() - 1);
    p.out_shape = a.shape();
    p.out_shape.back() = p.n;
    return p;
  }
  if (a.dim() != b.dim() || !std::equal(a.shape().begin(), a.shape().end() - 2, b.shape().begin()))
    throw std::invalid_argument("matmul: batch dimensions differ: " + to_string(a.shape()) + " x " +
                                to_string(b.shape()));
  p.b_batched = true;
  p.m = a.shape()[a.dim() - 2];
  p.batch = numel_range(a.shape(), 0, a.dim() - 2);
  p.out_shape = a.shape();
  p.out_shape.back() = p.n;
  return p;
}

// C = alpha op(A) op(B) + beta C for `batch` matrices at the given element strides, in the
// operands' dtype: float32, or bfloat16 accumulated in float32.
void gemm_typed(bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, float alpha,
                const Tensor& a, int64_t lda, int64_t stride_a, const Tensor& b, int64_t ldb,
                int64_t stride_b, float beta, Tensor& c, int64_t ldc, int64_t stride_c) {
  const Backend& be = detail::backend_of(c);
  if (c.dtype() == DType::BFloat16) {
    be.gemm_batched_bf16(ta, tb, batch, m, n, k, alpha, a.data<uint16_t>(), lda, stride_a,
                         b.data<uint16_t>(), ldb, stride_b, beta, c.data<uint16_t>(), ldc,
                         stride_c);
  } else if (batch == 1) {
    be.gemm(ta, tb, m, n, k, alpha, a.data<float>(), lda, b.data<float>(), ldb, beta,
            c.data<float>(), ldc);
  } else {
    be.gemm_batched(ta, tb, batch, m, n, k, alpha, a.data<float>(), lda, stride_a, b.data<float>(),
                    ldb, stride_b, beta, c.data<float>(), ldc, stride_c);
  }
}

// C = op(A) op(B) over the plan's batch; shapes given per matrix.
void batched_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& c, int64_t batch,
                  int64_t m, int64_t n, int64_t k, bool a_batched, bool b_batched, float beta) {
  int64_t lda = ta ? m : k, ldb = tb ? k : n;
  gemm_typed(ta, tb, batch, m, n, k, 1.0f, a, lda, a_batched ? m * k : 0, b, ldb,
             b_batched ? k * n : 0, beta, c, n, m * n);
}

// A vector of `n` ones in `like`'s dtype and device: bias rows and bias gradients as products.
Tensor ones_for(const Tensor& like, int64_t n) {
  return ones({n}, {.dtype = like.dtype(), .device = like.device()});
}

// out[rows, out_features] = x weight^T (+ bias, when defined). With a bias: the device's fused
// kernel where it has one; else the output starts as the bias broadcast over the rows and the
// gemm accumulates onto it (beta = 1): one write pass instead of the gemm's zeroing pass plus a
// read-modify-write add.
void linear_product(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& out,
                    int64_t rows, int64_t in, int64_t out_features) {
  const Backend& be = detail::backend_of(x);
  float beta = 0.0f;
  if (bias.defined() && x.dtype() == DType::Float32) {
    if (be.linear_bias(rows, out_features, in, x.data<float>(), weight.data<float>(),
                       bias.data<float>(), out.data<float>()))
      return;
    Tensor zero = zeros({1}, {.device = x.device()});
    int64_t bias_strides[2] = {0, 1};
    int64_t zero_strides[2] = {0, 0};
    int64_t shape2[2] = {rows, out_features};
    be.binary(BinaryOp::Add, bias.data<float>(), bias_strides, zero.data<float>(), zero_strides,
              out.data<float>(), shape2, 2);
    beta = 1.0f;
  } else if (bias.defined()) {  // out[rows, out] = ones[rows, 1] bias[1, out]: exact copies
    gemm_typed(false, false, 1, rows, out_features, 1, 1.0f, ones_for(x, rows), 1, 0, bias,
               out_features, 0, 0.0f, out, out_features, 0);
    beta = 1.0f;
  }
  gemm_typed(false, true, 1, rows, out_features, in, 1.0f, x, in, 0, weight, in, 0, beta, out,
             out_features, 0);
}

struct MatmulBackward : autograd::Node {
  Tensor a, b;
  MatmulPlan plan;
  const char* name() const override { return "MatmulBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>& needed) override {
    std::vector<Tensor> out(2);
    const MatmulPlan& p = plan;
    if (needed[0]) {  // dA = dC B^T
      Tensor ga = empty_like(a);
      if (p.b_batched)
        batched_gemm(g, false, b, true, ga, p.batch, p.m, p.k, p.n, true, true, 0.0f);
      else
        batched_gemm(g, false, b, true, ga, 1, p.m, p.k, p.n, false, false, 0.0f);
      out[0] = ga;
    }
    if (needed[1]) {  // dB = A^T dC
      Tensor gb = empty_like(b);
      if (p.b_batched)
        batched_gemm(a, true, g, false, gb, p.batch, p.k, p.n, p.m, true, true, 0.0f);
      else
        batched_gemm(a, true, g, false, gb, 1, p.k, p.n, p.m, false, false, 0.0f);
      out[1] = gb;
    }
    return out;
  }
  void release() override {
    a = Tensor();
    b = Tensor();
  }
};

struct LinearBackward : autograd::Node {
  Tensor x, weight;
  int64_t rows = 0, in = 0, out_features = 0;
  bool has_bias = false;
  const char* name() const override { return "LinearBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>& needed) override {
    std::vector<Tensor> out(3);
    if (needed[0]) {  // dX[rows, in] = dY[rows, out] W[out, in]
      Tensor gx = empty_like(x);
      gemm_typed(false, false, 1, rows, in, out_features, 1.0f, g, out_features, 0, weight, in, 0,
                 0.0f, gx, in, 0);
      out[0] = gx;
    }
    if (needed[1]) {  // dW[out, in] = dY^T[out, rows] X[rows, in]
      Tensor gw = empty_like(weight);
      gemm_typed(true, false, 1, out_features, in, rows, 1.0f, g, out_features, 0, x, in, 0, 0.0f,
                 gw, in, 0);
      out[1] = gw;
    }
    if (has_bias && needed.size() > 2 && needed[2]) {
      Tensor gb = empty({out_features}, {.dtype = g.dtype(), .device = g.device()});
      if (g.dtype() == DType::Float32) {
        detail::backend_of(g).sum_dim(g.data<float>(), gb.data<float>(), 1, rows, out_features);
      } else {  // db[1, out] = ones[1, rows] dY[rows, out], accumulated in float32
        gemm_typed(false, false, 1, 1, out_features, rows, 1.0f, ones_for(g, rows), rows, 0, g,
                   out_features, 0, 0.0f, gb, out_features, 0);
      }
      out[2] = gb;
    }
    return out;
  }
  void release() override {
    x = Tensor();
    weight = Tensor();
  }
};

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::check_defined("matmul", a, "a");
  detail::check_defined("matmul", b, "b");
  detail::check_same_device("matmul", a, b);
  detail::check_same_dtype("matmul", a, b);
  MatmulPlan p = plan_matmul(a, b);
  Tensor out = empty(p.out_shape, {.dtype = a.dtype(), .device = a.device()});
  batched_gemm(a, false, b, false, out, p.batch, p.m, p.n, p.k, p.b_batched, p.b_batched, 0.0f);
  if (autograd::any_needs_grad({a, b})) {
    auto node = std::make_shared<MatmulBackward>();
    node->a = a.detach();
    node->b = b.detach();
    node->plan = p;
    out = autograd::attach(out, node, {a, b});
  }
  return trace::record("matmul", {a, b}, out,
                       [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); });
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  detail::check_defined("bmm", a, "a");
  detail::check_defined("bmm", b, "b");
  if (a.dim() != 3 || b.dim() != 3)
    throw std::invalid_argument("bmm: expected a [B, m, k] and b [B, k, n], got " +
                                to_string(a.shape()) + " and " + to_string(b.shape()));
  return matmul(a, b);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  detail::check_defined("linear", x, "input");
  detail::check_defined("linear", weight, "weight");
  detail::check_same_device("linear", x, weight);
  detail::check_same_dtype("linear", x, weight);
  if (weight.dim() != 2 || x.dim() < 1 || x.shape().back() != weight.shape()[1])
    throw std::invalid_argument(
        "linear: input of shape " + to_string(x.shape()) + " does not match weight of shape " +
        to_string(weight.shape()) + " (expected input [..., " +
        (weight.dim() == 2 ? std::to_string(weight.shape()[1]) : "?") + "])");
  int64_t in = weight.shape()[1], out_features = weight.shape()[0];
  int64_t rows = in == 0 ? numel_range(x.shape(), 0, x.dim() - 1) : x.numel() / in;
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor out = empty(out_shape, {.dtype = x.dtype(), .device = x.device()});
  if (bias.defined()) {
    detail::check_same_device("linear", x, bias);
    detail::check_same_dtype("linear", x, bias);
    if (bias.dim() != 1 || bias.shape()[0] != out_features)
      throw std::invalid_argument("linear: bias of shape " + to_string(bias.shape()) +
                                  " does not match " + std::to_string(out_features) +
                                  " output features");
  }
  linear_product(x, weight, bias, out, rows, in, out_features);
  std::vector<Tensor> inputs = {x, weight};
  if (bias.defined()) inputs.push_back(bias);
  if (autograd::any_needs_grad(inputs)) {
    auto node = std::make_shared<LinearBackward>();
    node->x = x.detach();
    node->weight = weight.detach();
    node->rows = rows;
    node->in = in;
    node->out_features = out_features;
    node->has_bias = bias.defined();
    out = autograd::attach(out, node, inputs);
  }
  return trace::record("linear", inputs, out, [](const std::vector<Tensor>& in_) {
    return linear(in_[0], in_[1], in_.size() > 2 ? in_[2] : Tensor());
  });
}

}  // namespace tensorplay
