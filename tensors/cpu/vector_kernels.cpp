// Host kernels vectorised with Highway (vector_kernels.h). foreach_target.h compiles this file once
// per x86 target; HWY_DYNAMIC_DISPATCH calls the copy for the target cpu_isa.cpp chose.
//
// Each loop runs whole vectors, then the tail through a padded buffer with the same vector code,
// so every element is computed by the same instructions. Reductions keep one vector of partial
// sums and fold it in a fixed order: a rerun on the same machine gives the same bits. Targets
// with different vector widths sum in different orders and agree within float rounding.
// NaN and Inf propagate as in PyTorch: relu(NaN) = NaN, exp(NaN) = NaN, exp(+Inf) = +Inf.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensors/cpu/vector_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "tensors/backend.h"

HWY_BEFORE_NAMESPACE();
namespace tensorplay::cpu_kernels::vec {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

// -- loops over whole vectors and a padded tail ------------------------------------------------

// y[i] = f(x0[i], x1[i], x2[i]) for the inputs given (null inputs read as zeros).
template <class F>
HWY_INLINE void map3(const float* x0, const float* x1, const float* x2, float* y, int64_t n,
                     const F& f) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const V zero = hn::Zero(d);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    V a = x0 ? hn::LoadU(d, x0 + i) : zero;
    V b = x1 ? hn::LoadU(d, x1 + i) : zero;
    V c = x2 ? hn::LoadU(d, x2 + i) : zero;
    hn::StoreU(f(a, b, c), d, y + i);
  }
  if (i == n) return;
  const int64_t rest = n - i;
  HWY_ALIGN float b0[kMaxLanes] = {}, b1[kMaxLanes] = {}, b2[kMaxLanes] = {}, out[kMaxLanes];
  if (x0) std::memcpy(b0, x0 + i, rest * sizeof(float));
  if (x1) std::memcpy(b1, x1 + i, rest * sizeof(float));
  if (x2) std::memcpy(b2, x2 + i, rest * sizeof(float));
  hn::Store(f(hn::Load(d, b0), hn::Load(d, b1), hn::Load(d, b2)), d, out);
  std::memcpy(y + i, out, rest * sizeof(float));
}

// Folds f(x0[i], x1[i]) over i into one vector with `combine`, the tail padded with `pad` (the
// identity of combine, applied after f). x1 may be null (read as zeros).
template <class F, class C>
HWY_INLINE V reduce2(const float* x0, const float* x1, int64_t n, float pad, const F& f,
                     const C& combine) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const V zero = hn::Zero(d);
  V acc = hn::Set(d, pad);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    V a = hn::LoadU(d, x0 + i);
    V b = x1 ? hn::LoadU(d, x1 + i) : zero;
    acc = combine(acc, f(a, b));
  }
  if (i < n) {
    const int64_t rest = n - i;
    HWY_ALIGN float b0[kMaxLanes] = {}, b1[kMaxLanes] = {};
    std::memcpy(b0, x0 + i, rest * sizeof(float));
    if (x1) std::memcpy(b1, x1 + i, rest * sizeof(float));
    V v = f(hn::Load(d, b0), hn::Load(d, b1));
    acc =
        combine(acc, hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(rest)), v, hn::Set(d, pad)));
  }
  return acc;
}

// The lanes of v summed (a tree over the lanes: a fixed order for each target).
HWY_INLINE float fold_sum(V v) {
  const D d;
  return hn::GetLane(hn::SumOfLanes(d, v));
}

// The largest lane, NaN if any lane is NaN.
HWY_INLINE float fold_max(V v) {
  const D d;
  if (!hn::AllFalse(d, hn::IsNaN(v))) return std::numeric_limits<float>::quiet_NaN();
  return hn::GetLane(hn::MaxOfLanes(d, v));
}

HWY_INLINE V add_v(V a, V b) { return hn::Add(a, b); }

// Max that keeps NaN from either operand (x86's max keeps only the second operand's).
HWY_INLINE V max_nan(V acc, V x) {
  return hn::IfThenElse(hn::IsNaN(x), x, hn::IfThenElse(hn::IsNaN(acc), acc, hn::Max(acc, x)));
}

float Sum(const float* x, int64_t n) {
  return fold_sum(reduce2(
      x, nullptr, n, 0.0f, [](V a, V) HWY_ATTR { return a; },
      [](V a, V b) HWY_ATTR { return add_v(a, b); }));
}

// -- math -------------------------------------------------------------------------------------

// exp with IEEE special values: Highway's Exp flushes below -104 and does not handle NaN or
// overflow.
HWY_INLINE V exp_full(V x) {
  const D d;
  const V kOverflow = hn::Set(d, 88.72283935546875f);
  V y = hn::Exp(d, hn::Min(x, kOverflow));
  y = hn::IfThenElse(hn::Gt(x, kOverflow), hn::Set(d, std::numeric_limits<float>::infinity()), y);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// The scalar kernels' tanh (a clamped rational function, Eigen's fast tanh), lane for lane.
HWY_INLINE V fast_tanh(V x) {
  const D d;
  const V clamp = hn::Set(d, 7.90531110763549805f);
  x = hn::Min(hn::Max(x, hn::Neg(clamp)), clamp);
  const V x2 = hn::Mul(x, x);
  V p = hn::Set(d, -2.76076847742355e-16f);
  p = hn::Add(hn::Mul(p, x2), hn::Set(d, 2.00018790482477e-13f));
  p = hn::Add(hn::Mul(p, x2), hn::Set(d, -8.60467152213735e-11f));
  p = hn::Add(hn::Mul(p, x2), hn::Set(d, 5.12229709037114e-08f));
  p = hn::Add(hn::Mul(p, x2), hn::Set(d, 1.48572235717979e-05f));
  p = hn::Add(hn::Mul(p, x2), hn::Set(d, 6.37261928875436e-04f));
  p = hn::Add(hn::Mul(p, x2), hn::Set(d, 4.89352455891786e-03f));
  p = hn::Mul(p, x);
  V q = hn::Set(d, 1.19825839466702e-06f);
  q = hn::Add(hn::Mul(q, x2), hn::Set(d, 1.18534705686654e-04f));
  q = hn::Add(hn::Mul(q, x2), hn::Set(d, 2.26843463243900e-03f));
  q = hn::Add(hn::Mul(q, x2), hn::Set(d, 4.89352518554385e-03f));
  return hn::Div(p, q);
}

HWY_INLINE V tanh_full(V x) {
  const D d;
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Tanh(d, x));
}

HWY_INLINE V log_full(V x) {
  const D d;
  const float inf = std::numeric_limits<float>::infinity();
  V y = hn::Log(d, x);
  y = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), hn::Set(d, -inf), y);
  y = hn::IfThenElse(hn::Eq(x, hn::Set(d, inf)), x, y);
  const V nan = hn::Set(d, std::numeric_limits<float>::quiet_NaN());
  y = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), nan, y);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

HWY_INLINE V gelu(V v) {
  const D d;
  const V k = hn::Set(d, 0.7978845608028654f), c = hn::Set(d, 0.044715f);
  const V half = hn::Set(d, 0.5f), one = hn::Set(d, 1.0f);
  V inner = hn::Mul(k, hn::Add(v, hn::Mul(hn::Mul(hn::Mul(c, v), v), v)));
  V y = hn::Mul(hn::Mul(half, v), hn::Add(one, fast_tanh(inner)));
  // PyTorch: gelu(-inf) = -inf * (1 + tanh(-inf)) = -inf * 0 = NaN. Whether 1 + fast_tanh rounds
  // to exactly 0 depends on FMA contraction, so the rule is stated, not left to rounding.
  const float inf = std::numeric_limits<float>::infinity();
  return hn::IfThenElse(hn::Eq(v, hn::Set(d, -inf)),
                        hn::Set(d, std::numeric_limits<float>::quiet_NaN()), y);
}

HWY_INLINE V gelu_grad(V v, V g) {
  const D d;
  const V k = hn::Set(d, 0.7978845608028654f), c = hn::Set(d, 0.044715f);
  const V half = hn::Set(d, 0.5f), one = hn::Set(d, 1.0f), three_c = hn::Set(d, 3.0f * 0.044715f);
  V inner = hn::Mul(k, hn::Add(v, hn::Mul(hn::Mul(hn::Mul(c, v), v), v)));
  V t = fast_tanh(inner);
  V dinner = hn::Mul(k, hn::Add(one, hn::Mul(hn::Mul(three_c, v), v)));
  V left = hn::Mul(half, hn::Add(one, t));
  V right = hn::Mul(hn::Mul(hn::Mul(half, v), hn::Sub(one, hn::Mul(t, t))), dinner);
  return hn::Mul(g, hn::Add(left, right));
}

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
  const V zero = hn::Zero(d), one = hn::Set(d, 1.0f);
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
      return run([&](V v) HWY_ATTR { return hn::Div(one, hn::Add(one, exp_full(hn::Neg(v)))); });
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

// -- RMS norm -----------------------------------------------------------------------------------

// x * inv (* weight when given) into y.
HWY_INLINE void scale_row(const float* x, const float* weight, float inv, float* y, int64_t n) {
  const D d;
  const V iv = hn::Set(d, inv);
  if (weight != nullptr) {
    map3(x, weight, nullptr, y, n,
         [&](V a, V w, V) HWY_ATTR { return hn::Mul(hn::Mul(a, iv), w); });
  } else {
    map3(x, nullptr, nullptr, y, n, [&](V a, V, V) HWY_ATTR { return hn::Mul(a, iv); });
  }
}

void RmsNorm(const float* x, const float* weight, float* y, float* rstd, int64_t rows, int64_t cols,
             float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float squares = fold_sum(reduce2(
        xr, nullptr, cols, 0.0f, [](V a, V) HWY_ATTR { return hn::Mul(a, a); },
        [](V a, V b) HWY_ATTR { return add_v(a, b); }));
    const float inv = 1.0f / std::sqrt(squares / static_cast<float>(cols) + eps);
    rstd[r] = inv;
    scale_row(xr, weight, inv, y + r * cols, cols);
  }
}

// With g = gy * weight: gx = rstd * (g - x * rstd^2 * mean(g * x)).
void RmsNormBackwardInput(const float* x, const float* weight, const float* rstd, const float* gy,
                          float* gx, int64_t rows, int64_t cols) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* gr = gy + r * cols;
    float* out = gx + r * cols;
    const float inv = rstd[r];
    float dot;  // g . x
    if (weight != nullptr) {
      V acc = hn::Zero(d);
      int64_t j = 0;
      for (; j + lanes <= cols; j += lanes)
        acc = hn::MulAdd(hn::Mul(hn::LoadU(d, gr + j), hn::LoadU(d, weight + j)),
                         hn::LoadU(d, xr + j), acc);
      if (j < cols) {  // the tail, zero-padded
        const size_t rest = static_cast<size_t>(cols - j) * sizeof(float);
        HWY_ALIGN float bg[kMaxLanes] = {}, bw[kMaxLanes] = {}, bx[kMaxLanes] = {};
        std::memcpy(bg, gr + j, rest);
        std::memcpy(bw, weight + j, rest);
        std::memcpy(bx, xr + j, rest);
        acc = hn::MulAdd(hn::Mul(hn::Load(d, bg), hn::Load(d, bw)), hn::Load(d, bx), acc);
      }
      dot = fold_sum(acc);
    } else {
      dot = fold_sum(reduce2(
          gr, xr, cols, 0.0f, [](V g, V a) HWY_ATTR { return hn::Mul(g, a); },
          [](V a, V b) HWY_ATTR { return add_v(a, b); }));
    }
    const float coef = dot / static_cast<float>(cols) * inv * inv;
    const V iv = hn::Set(d, inv), cv = hn::Set(d, coef);
    map3(gr, xr, weight, out, cols, [&](V g, V a, V w) HWY_ATTR {
      const V gw = weight != nullptr ? hn::Mul(g, w) : g;
      return hn::Mul(iv, hn::NegMulAdd(a, cv, gw));
    });
  }
}

// -- SwiGLU's gate ------------------------------------------------------------------------------

HWY_INLINE V sigmoid(V v) {
  const D d;
  const V one = hn::Set(d, 1.0f);
  return hn::Div(one, hn::Add(one, exp_full(hn::Neg(v))));
}

void SiluMul(const float* gate, const float* up, float* y, int64_t n) {
  map3(gate, up, nullptr, y, n,
       [](V g, V u, V) HWY_ATTR { return hn::Mul(hn::Mul(g, sigmoid(g)), u); });
}

// silu'(g) = s + g s (1 - s) = s (1 + g (1 - s)).
void SiluMulBackward(const float* gate, const float* up, const float* gy, float* ggate, float* gup,
                     int64_t n) {
  const D d;
  const V one = hn::Set(d, 1.0f);
  if (gup != nullptr)
    map3(gate, gy, nullptr, gup, n,
         [](V g, V dy, V) HWY_ATTR { return hn::Mul(dy, hn::Mul(g, sigmoid(g))); });
  if (ggate != nullptr)
    map3(gate, up, gy, ggate, n, [&](V g, V u, V dy) HWY_ATTR {
      const V s = sigmoid(g);
      return hn::Mul(hn::Mul(dy, u), hn::Mul(s, hn::MulAdd(g, hn::Sub(one, s), one)));
    });
}

// -- fused attention's row work ----------------------------------------------------------------

// x[i] = exp(x[i] - shift) in place; returns their sum.
HWY_INLINE float ExpShiftedSum(float* x, int64_t n, float shift) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const V sv = hn::Set(d, shift);
  V sum = hn::Zero(d);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const V e = exp_full(hn::Sub(hn::LoadU(d, x + i), sv));
    hn::StoreU(e, d, x + i);
    sum = hn::Add(sum, e);
  }
  if (i < n) {
    const int64_t rest = n - i;
    HWY_ALIGN float tail[kMaxLanes];
    std::memcpy(tail, x + i, rest * sizeof(float));
    const V e = exp_full(hn::Sub(hn::Load(d, tail), sv));
    hn::Store(e, d, tail);
    std::memcpy(x + i, tail, rest * sizeof(float));
    sum = hn::Add(sum, hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(rest)), e));
  }
  return fold_sum(sum);
}

void OnlineSoftmaxRows(float* s, int64_t rows, int64_t cols, float* m, float* l, float* rescale) {
  const float minus_inf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    float* sr = s + r * cols;
    const float block_max = fold_max(reduce2(
        sr, nullptr, cols, minus_inf, [](V a, V) HWY_ATTR { return a; },
        [](V a, V b) HWY_ATTR { return max_nan(a, b); }));
    const float mx = std::isnan(block_max) || block_max > m[r] ? block_max : m[r];
    if (mx == minus_inf) {  // every key so far is masked for this row: it adds nothing
      std::fill(sr, sr + cols, 0.0f);
      rescale[r] = 1.0f;
      continue;
    }
    rescale[r] = std::exp(m[r] - mx);
    l[r] = l[r] * rescale[r] + ExpShiftedSum(sr, cols, mx);
    m[r] = mx;
  }
}

void ScaleRows(float* x, int64_t rows, int64_t n, const float* factors) {
  const D d;
  for (int64_t r = 0; r < rows; ++r) {
    if (factors[r] == 1.0f) continue;
    const V f = hn::Set(d, factors[r]);
    map3(x + r * n, nullptr, nullptr, x + r * n, n,
         [&](V a, V, V) HWY_ATTR { return hn::Mul(a, f); });
  }
}

void ExpShiftedRows(float* p, int64_t rows, int64_t cols, const float* shift) {
  const D d;
  for (int64_t r = 0; r < rows; ++r) {
    const V s = hn::Set(d, shift[r]);
    map3(p + r * cols, nullptr, nullptr, p + r * cols, cols,
         [&](V a, V, V) HWY_ATTR { return exp_full(hn::Sub(a, s)); });
  }
}

void SoftmaxGradRows(const float* p, float* ds, int64_t rows, int64_t cols, const float* dot) {
  const D d;
  for (int64_t r = 0; r < rows; ++r) {
    const V dr = hn::Set(d, dot[r]);
    map3(p + r * cols, ds + r * cols, nullptr, ds + r * cols, cols,
         [&](V pv, V g, V) HWY_ATTR { return hn::Mul(pv, hn::Sub(g, dr)); });
  }
}

void RowDots(const float* a, const float* b, float* out, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    out[r] = fold_sum(reduce2(
        a + r * n, b + r * n, n, 0.0f, [](V x, V y) HWY_ATTR { return hn::Mul(x, y); },
        [](V x, V y) HWY_ATTR { return add_v(x, y); }));
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
HWY_EXPORT(RmsNorm);
HWY_EXPORT(RmsNormBackwardInput);
HWY_EXPORT(SiluMul);
HWY_EXPORT(SiluMulBackward);
HWY_EXPORT(OnlineSoftmaxRows);
HWY_EXPORT(ScaleRows);
HWY_EXPORT(ExpShiftedRows);
HWY_EXPORT(SoftmaxGradRows);
HWY_EXPORT(RowDots);

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

void rms_norm(const float* x, const float* weight, float* y, float* rstd, int64_t rows,
              int64_t cols, float eps) {
  HWY_DYNAMIC_DISPATCH(RmsNorm)(x, weight, y, rstd, rows, cols, eps);
}
void rms_norm_backward_input(const float* x, const float* weight, const float* rstd,
                             const float* gy, float* gx, int64_t rows, int64_t cols) {
  HWY_DYNAMIC_DISPATCH(RmsNormBackwardInput)(x, weight, rstd, gy, gx, rows, cols);
}
void silu_mul(const float* gate, const float* up, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SiluMul)(gate, up, y, n);
}
void silu_mul_backward(const float* gate, const float* up, const float* gy, float* ggate,
                       float* gup, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SiluMulBackward)(gate, up, gy, ggate, gup, n);
}
void online_softmax_rows(float* s, int64_t rows, int64_t cols, float* m, float* l, float* rescale) {
  HWY_DYNAMIC_DISPATCH(OnlineSoftmaxRows)(s, rows, cols, m, l, rescale);
}
void scale_rows(float* x, int64_t rows, int64_t n, const float* factors) {
  HWY_DYNAMIC_DISPATCH(ScaleRows)(x, rows, n, factors);
}
void exp_shifted_rows(float* p, int64_t rows, int64_t cols, const float* shift) {
  HWY_DYNAMIC_DISPATCH(ExpShiftedRows)(p, rows, cols, shift);
}
void softmax_grad_rows(const float* p, float* ds, int64_t rows, int64_t cols, const float* dot) {
  HWY_DYNAMIC_DISPATCH(SoftmaxGradRows)(p, ds, rows, cols, dot);
}
void row_dots(const float* a, const float* b, float* out, int64_t rows, int64_t n) {
  HWY_DYNAMIC_DISPATCH(RowDots)(a, b, out, rows, n);
}

}  // namespace tensorplay::cpu_kernels::vec
#endif  // HWY_ONCE
