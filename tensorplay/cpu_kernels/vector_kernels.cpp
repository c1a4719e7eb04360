// Host kernels vectorised with Highway (vector_kernels.h). foreach_target.h compiles this file once
// per x86 target; HWY_DYNAMIC_DISPATCH calls the copy for the target cpu_isa.cpp chose. The loops,
// reductions and math they share (and their rules for tails, sums and NaN) are in
// vector_math-inl.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensorplay/cpu_kernels/vector_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "hwy/highway.h"
#include "tensorplay/core/backend.h"
#include "tensorplay/cpu_kernels/vector_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tensorplay::cpu_kernels::vec {
namespace HWY_NAMESPACE {

// -- elementwise ------------------------------------------------------------------------------

void BinaryRow(BinaryOp op, const float* a, int a_step, const float* b, int b_step, float* out,
               int64_t n) {
  const D d;
  // A scalar operand is held in a buffer of n = 1 broadcast by Set.
  const V av = a_step == 0 ? hn::Set(d, a[0]) : hn::Zero(d);
  const V bv = b_step == 0 ? hn::Set(d, b[0]) : hn::Zero(d);
  const float* ap = a_step == 0 ? nullptr : a;
  const float* bp = b_step == 0 ? nullptr : b;
  auto run = [&](auto f) HWY_ATTR {
    map3(ap, bp, nullptr, out, n,
         [&](V x, V y, V) HWY_ATTR { return f(ap ? x : av, bp ? y : bv); });
  };
  switch (op) {
    case BinaryOp::Add:
      return run([](V x, V y) HWY_ATTR { return hn::Add(x, y); });
    case BinaryOp::Sub:
      return run([](V x, V y) HWY_ATTR { return hn::Sub(x, y); });
    case BinaryOp::Mul:
      return run([](V x, V y) HWY_ATTR { return hn::Mul(x, y); });
    case BinaryOp::Div:
      return run([](V x, V y) HWY_ATTR { return hn::Div(x, y); });
  }
}

void Affine(const float* x, float* out, int64_t n, float alpha, float beta) {
  const D d;
  const V a = hn::Set(d, alpha), b = hn::Set(d, beta);
  map3(x, nullptr, nullptr, out, n, [&](V v, V, V) HWY_ATTR { return hn::Add(hn::Mul(v, a), b); });
}

void Unary(UnaryOp op, const float* x, float* y, int64_t n) {
  const D d;
  const V zero = hn::Zero(d);
  auto run = [&](auto f) HWY_ATTR {
    map3(x, nullptr, nullptr, y, n, [&](V v, V, V) HWY_ATTR { return f(v); });
  };
  switch (op) {
    case UnaryOp::Relu:  // x < 0 ? 0 : x keeps NaN
      return run([&](V v) HWY_ATTR { return hn::IfThenElse(hn::Lt(v, zero), zero, v); });
    case UnaryOp::Gelu:
      return run([](V v) HWY_ATTR { return gelu(v); });
    case UnaryOp::Tanh:
      return run([](V v) HWY_ATTR { return tanh_full(v); });
    case UnaryOp::Exp:
      return run([](V v) HWY_ATTR { return exp_full(v); });
    case UnaryOp::Log:
      return run([](V v) HWY_ATTR { return log_full(v); });
    case UnaryOp::Neg:
      return run([](V v) HWY_ATTR { return hn::Neg(v); });
    case UnaryOp::Sqrt:
      return run([](V v) HWY_ATTR { return hn::Sqrt(v); });
    case UnaryOp::Square:
      return run([](V v) HWY_ATTR { return hn::Mul(v, v); });
    case UnaryOp::Sigmoid:
      return run([](V v) HWY_ATTR { return sigmoid(v); });
  }
}

void UnaryBackward(UnaryOp op, const float* x, const float* y, const float* gy, float* gx,
                   int64_t n) {
  const D d;
  const V zero = hn::Zero(d), one = hn::Set(d, 1.0f), half = hn::Set(d, 0.5f),
          two = hn::Set(d, 2.0f);
  // Inputs: (x or y, gy); the operand not read may be null.
  const float* first = unary_grad_reads_output(op) ? y : x;
  auto run = [&](auto f) HWY_ATTR {
    map3(first, gy, nullptr, gx, n, [&](V v, V g, V) HWY_ATTR { return f(v, g); });
  };
  switch (op) {
    case UnaryOp::Relu:  // PyTorch's threshold_backward: x <= 0 ? 0 : gy
      return run([&](V v, V g) HWY_ATTR { return hn::IfThenElse(hn::Le(v, zero), zero, g); });
    case UnaryOp::Gelu:
      return run([](V v, V g) HWY_ATTR { return gelu_grad(v, g); });
    case UnaryOp::Tanh:
      return run([&](V v, V g) HWY_ATTR { return hn::Mul(g, hn::Sub(one, hn::Mul(v, v))); });
    case UnaryOp::Exp:
      return run([](V v, V g) HWY_ATTR { return hn::Mul(g, v); });
    case UnaryOp::Log:
      return run([](V v, V g) HWY_ATTR { return hn::Div(g, v); });
    case UnaryOp::Neg:
      return map3(gy, nullptr, nullptr, gx, n, [](V g, V, V) HWY_ATTR { return hn::Neg(g); });
    case UnaryOp::Sqrt:
      return run([&](V v, V g) HWY_ATTR { return hn::Div(hn::Mul(g, half), v); });
    case UnaryOp::Square:
      return run([&](V v, V g) HWY_ATTR { return hn::Mul(hn::Mul(g, two), v); });
    case UnaryOp::Sigmoid:
      return run([&](V v, V g) HWY_ATTR { return hn::Mul(hn::Mul(g, v), hn::Sub(one, v)); });
  }
}

void SumDim(const float* x, float* out, int64_t outer, int64_t reduce, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    float* dst = out + o * inner;
    if (inner == 1) {
      dst[0] = Sum(x + o * reduce, reduce);
      continue;
    }
    std::fill(dst, dst + inner, 0.0f);
    for (int64_t r = 0; r < reduce; ++r) {
      const float* src = x + (o * reduce + r) * inner;
      map3(dst, src, nullptr, dst, inner, [](V a, V b, V) HWY_ATTR { return hn::Add(a, b); });
    }
  }
}

// -- softmax ----------------------------------------------------------------------------------

void SoftmaxRow(const float* x, float* y, int64_t n, bool log) {
  const D d;
  const float mx = fold_max(reduce2(
      x, nullptr, n, -std::numeric_limits<float>::infinity(), [](V a, V) HWY_ATTR { return a; },
      [](V a, V b) HWY_ATTR { return max_nan(a, b); }));
  const V m = hn::Set(d, mx);
  if (log) {
    float sum = fold_sum(reduce2(
        x, nullptr, n, 0.0f, [&](V a, V) HWY_ATTR { return exp_full(hn::Sub(a, m)); },
        [](V a, V b) HWY_ATTR { return add_v(a, b); }));
    const V shift = hn::Set(d, mx + std::log(sum));
    map3(x, nullptr, nullptr, y, n, [&](V a, V, V) HWY_ATTR { return hn::Sub(a, shift); });
    return;
  }
  map3(x, nullptr, nullptr, y, n, [&](V a, V, V) HWY_ATTR { return exp_full(hn::Sub(a, m)); });
  const V inv = hn::Set(d, 1.0f / Sum(y, n));
  map3(y, nullptr, nullptr, y, n, [&](V a, V, V) HWY_ATTR { return hn::Mul(a, inv); });
}

void SoftmaxRows(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  for (int64_t r = 0; r < rows; ++r) SoftmaxRow(x + r * n, y + r * n, n, log);
}

void SoftmaxRowsBackward(const float* y, const float* gy, float* gx, int64_t rows, int64_t n,
                         bool log) {
  const D d;
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * n;
    const float* gr = gy + r * n;
    float* out = gx + r * n;
    if (log) {
      const V dot = hn::Set(d, Sum(gr, n));
      map3(yr, gr, nullptr, out, n,
           [&](V v, V g, V) HWY_ATTR { return hn::Sub(g, hn::Mul(exp_full(v), dot)); });
    } else {
      const V dot = hn::Set(d, fold_sum(reduce2(
                                   yr, gr, n, 0.0f, [](V v, V g) HWY_ATTR { return hn::Mul(g, v); },
                                   [](V a, V b) HWY_ATTR { return add_v(a, b); })));
      map3(yr, gr, nullptr, out, n,
           [&](V v, V g, V) HWY_ATTR { return hn::Mul(v, hn::Sub(g, dot)); });
    }
  }
}

void CausalSoftmax(const float* x, float* y, int64_t batch, int64_t t_q, int64_t t_k) {
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < t_q; ++i) {
      const float* xr = x + (b * t_q + i) * t_k;
      float* yr = y + (b * t_q + i) * t_k;
      const int64_t visible = std::min(i + 1, t_k);
      SoftmaxRow(xr, yr, visible, false);
      std::fill(yr + visible, yr + t_k, 0.0f);
    }
  }
}

// -- layer norm -------------------------------------------------------------------------------

void LayerNorm(const float* x, const float* weight, const float* bias, float* y, float* mean,
               float* rstd, int64_t rows, int64_t cols, float eps) {
  const D d;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const float m = Sum(xr, cols) / static_cast<float>(cols);
    const V mv = hn::Set(d, m);
    const float var = fold_sum(reduce2(
        xr, nullptr, cols, 0.0f,
        [&](V a, V) HWY_ATTR {
          V c = hn::Sub(a, mv);
          return hn::Mul(c, c);
        },
        [](V a, V b) HWY_ATTR { return add_v(a, b); }));
    const float rs = 1.0f / std::sqrt(var / static_cast<float>(cols) + eps);
    mean[r] = m;
    rstd[r] = rs;
    const V rv = hn::Set(d, rs);
    const bool has_w = weight != nullptr, has_b = bias != nullptr;
    map3(xr, weight, bias, yr, cols, [&](V a, V w, V b) HWY_ATTR {
      V v = hn::Mul(hn::Sub(a, mv), rv);
      if (has_w) v = hn::Mul(v, w);
      if (has_b) v = hn::Add(v, b);
      return v;
    });
  }
}

void LayerNormBackwardInput(const float* x, const float* weight, const float* mean,
                            const float* rstd, const float* gy, float* gx, int64_t rows,
                            int64_t cols) {
  // gx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = gy * weight.
  const D d;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* gr = gy + r * cols;
    float* out = gx + r * cols;
    const V mv = hn::Set(d, mean[r]), rv = hn::Set(d, rstd[r]);
    // dxhat into out first (out may not alias gy: the kernel table gives distinct buffers).
    if (weight) {
      map3(gr, weight, nullptr, out, cols, [](V g, V w, V) HWY_ATTR { return hn::Mul(g, w); });
    } else {
      std::memcpy(out, gr, cols * sizeof(float));
    }
    const float sum_d = Sum(out, cols);
    const float sum_dx = fold_sum(reduce2(
        out, xr, cols, 0.0f,
        [&](V dv, V a) HWY_ATTR { return hn::Mul(dv, hn::Mul(hn::Sub(a, mv), rv)); },
        [](V a, V b) HWY_ATTR { return add_v(a, b); }));
    const float scale = 1.0f / static_cast<float>(cols);
    const V av = hn::Set(d, sum_d * scale), bv = hn::Set(d, sum_dx * scale);
    map3(out, xr, nullptr, out, cols, [&](V dv, V a, V) HWY_ATTR {
      V xhat = hn::Mul(hn::Sub(a, mv), rv);
      return hn::Mul(rv, hn::Sub(hn::Sub(dv, av), hn::Mul(xhat, bv)));
    });
  }
}

void LayerNormBackwardParams(const float* x, const float* mean, const float* rstd, const float* gy,
                             float* gweight, float* gbias, int64_t rows, int64_t cols) {
  const D d;
  if (gweight) std::fill(gweight, gweight + cols, 0.0f);
  if (gbias) std::fill(gbias, gbias + cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* gr = gy + r * cols;
    const V mv = hn::Set(d, mean[r]), rv = hn::Set(d, rstd[r]);
    if (gweight)
      map3(gweight, gr, xr, gweight, cols, [&](V acc, V g, V a) HWY_ATTR {
        return hn::Add(acc, hn::Mul(g, hn::Mul(hn::Sub(a, mv), rv)));
      });
    if (gbias)
      map3(gbias, gr, nullptr, gbias, cols, [](V acc, V g, V) HWY_ATTR { return hn::Add(acc, g); });
  }
}

// -- embedding and cross entropy --------------------------------------------------------------

void EmbeddingBackward(const float* ids, const float* gy, float* gweight, int64_t n, int64_t dim,
                       int64_t vocab) {
  std::fill(gweight, gweight + vocab * dim, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    float* dst = gweight + static_cast<int64_t>(ids[i]) * dim;
    map3(dst, gy + i * dim, nullptr, dst, dim, [](V a, V b, V) HWY_ATTR { return hn::Add(a, b); });
  }
}

void CrossEntropyBackward(const float* logp, const float* targets, const float* grad_rows,
                          float* gx, int64_t rows, int64_t classes, int64_t ignore_index) {
  const D d;
  for (int64_t r = 0; r < rows; ++r) {
    auto t = static_cast<int64_t>(targets[r]);
    float* out = gx + r * classes;
    if (t == ignore_index) {
      std::fill(out, out + classes, 0.0f);
      continue;
    }
    const V g = hn::Set(d, grad_rows[r]);
    map3(logp + r * classes, nullptr, nullptr, out, classes,
         [&](V lp, V, V) HWY_ATTR { return hn::Mul(g, exp_full(lp)); });
    out[t] -= grad_rows[r];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tensorplay::cpu_kernels::vec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensorplay::cpu_kernels::vec {

HWY_EXPORT(BinaryRow);
HWY_EXPORT(Affine);
HWY_EXPORT(Unary);
HWY_EXPORT(UnaryBackward);
HWY_EXPORT(SumDim);
HWY_EXPORT(SoftmaxRows);
HWY_EXPORT(SoftmaxRowsBackward);
HWY_EXPORT(CausalSoftmax);
HWY_EXPORT(LayerNorm);
HWY_EXPORT(LayerNormBackwardInput);
HWY_EXPORT(LayerNormBackwardParams);
HWY_EXPORT(EmbeddingBackward);
HWY_EXPORT(CrossEntropyBackward);

void binary_row(BinaryOp op, const float* a, int a_step, const float* b, int b_step, float* out,
                int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinaryRow)(op, a, a_step, b, b_step, out, n);
}
void affine(const float* x, float* out, int64_t n, float alpha, float beta) {
  HWY_DYNAMIC_DISPATCH(Affine)(x, out, n, alpha, beta);
}
void unary(UnaryOp op, const float* x, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(Unary)(op, x, y, n);
}
void unary_backward(UnaryOp op, const float* x, const float* y, const float* gy, float* gx,
                    int64_t n) {
  HWY_DYNAMIC_DISPATCH(UnaryBackward)(op, x, y, gy, gx, n);
}
void sum_dim(const float* x, float* out, int64_t outer, int64_t reduce, int64_t inner) {
  HWY_DYNAMIC_DISPATCH(SumDim)(x, out, outer, reduce, inner);
}
void softmax_rows(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  HWY_DYNAMIC_DISPATCH(SoftmaxRows)(x, y, rows, n, log);
}
void softmax_rows_backward(const float* y, const float* gy, float* gx, int64_t rows, int64_t n,
                           bool log) {
  HWY_DYNAMIC_DISPATCH(SoftmaxRowsBackward)(y, gy, gx, rows, n, log);
}
void causal_softmax(const float* x, float* y, int64_t batch, int64_t t_q, int64_t t_k) {
  HWY_DYNAMIC_DISPATCH(CausalSoftmax)(x, y, batch, t_q, t_k);
}
void layer_norm(const float* x, const float* weight, const float* bias, float* y, float* mean,
                float* rstd, int64_t rows, int64_t cols, float eps) {
  HWY_DYNAMIC_DISPATCH(LayerNorm)(x, weight, bias, y, mean, rstd, rows, cols, eps);
}
void layer_norm_backward_input(const float* x, const float* weight, const float* mean,
                               const float* rstd, const float* gy, float* gx, int64_t rows,
                               int64_t cols) {
  HWY_DYNAMIC_DISPATCH(LayerNormBackwardInput)(x, weight, mean, rstd, gy, gx, rows, cols);
}
void layer_norm_backward_params(const float* x, const float* mean, const float* rstd,
                                const float* gy, float* gweight, float* gbias, int64_t rows,
                                int64_t cols) {
  HWY_DYNAMIC_DISPATCH(LayerNormBackwardParams)(x, mean, rstd, gy, gweight, gbias, rows, cols);
}
void embedding_backward(const float* ids, const float* gy, float* gweight, int64_t n, int64_t dim,
                        int64_t vocab) {
  HWY_DYNAMIC_DISPATCH(EmbeddingBackward)(ids, gy, gweight, n, dim, vocab);
}
void cross_entropy_backward(const float* logp, const float* targets, const float* grad_rows,
                            float* gx, int64_t rows, int64_t classes, int64_t ignore_index) {
  HWY_DYNAMIC_DISPATCH(CrossEntropyBackward)
  (logp, targets, grad_rows, gx, rows, classes, ignore_index);
}

}  // namespace tensorplay::cpu_kernels::vec
#endif  // HWY_ONCE
