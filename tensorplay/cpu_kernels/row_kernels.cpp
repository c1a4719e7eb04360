// Vector kernels that fuse a row's work (row_kernels.h): RMSNorm, SwiGLU's gate and the fused
// attention's tiles. foreach_target.h compiles this file once per x86 target; HWY_DYNAMIC_DISPATCH
// calls the copy for the target cpu_isa.cpp chose. The shared loops and math are in
// vector_math-inl.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensorplay/cpu_kernels/row_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "hwy/highway.h"
#include "tensorplay/cpu_kernels/row_kernels.h"
#include "tensorplay/cpu_kernels/vector_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tensorplay::cpu_kernels::vec {
namespace HWY_NAMESPACE {

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

void ScaleRows(float* x, int64_t rows, int64_t n, int64_t ld, const float* factors) {
  const D d;
  for (int64_t r = 0; r < rows; ++r) {
    if (factors[r] == 1.0f) continue;
    const V f = hn::Set(d, factors[r]);
    map3(x + r * ld, nullptr, nullptr, x + r * ld, n,
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

void RowDots(const float* a, const float* b, int64_t ld, float* out, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    out[r] = fold_sum(reduce2(
        a + r * ld, b + r * ld, n, 0.0f, [](V x, V y) HWY_ATTR { return hn::Mul(x, y); },
        [](V x, V y) HWY_ATTR { return add_v(x, y); }));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tensorplay::cpu_kernels::vec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensorplay::cpu_kernels::vec {

HWY_EXPORT(RmsNorm);
HWY_EXPORT(RmsNormBackwardInput);
HWY_EXPORT(SiluMul);
HWY_EXPORT(SiluMulBackward);
HWY_EXPORT(OnlineSoftmaxRows);
HWY_EXPORT(ScaleRows);
HWY_EXPORT(ExpShiftedRows);
HWY_EXPORT(SoftmaxGradRows);
HWY_EXPORT(RowDots);

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
void scale_rows(float* x, int64_t rows, int64_t n, int64_t ld, const float* factors) {
  HWY_DYNAMIC_DISPATCH(ScaleRows)(x, rows, n, ld, factors);
}
void exp_shifted_rows(float* p, int64_t rows, int64_t cols, const float* shift) {
  HWY_DYNAMIC_DISPATCH(ExpShiftedRows)(p, rows, cols, shift);
}
void softmax_grad_rows(const float* p, float* ds, int64_t rows, int64_t cols, const float* dot) {
  HWY_DYNAMIC_DISPATCH(SoftmaxGradRows)(p, ds, rows, cols, dot);
}
void row_dots(const float* a, const float* b, int64_t ld, float* out, int64_t rows, int64_t n) {
  HWY_DYNAMIC_DISPATCH(RowDots)(a, b, ld, out, rows, n);
}

}  // namespace tensorplay::cpu_kernels::vec
#endif  // HWY_ONCE
