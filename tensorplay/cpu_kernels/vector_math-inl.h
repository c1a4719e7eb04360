// The vector kernels' shared parts, compiled once per x86 target by each file that includes it
// after foreach_target.h (vector_kernels.cpp, row_kernels.cpp): loops over whole vectors and a
// padded tail, reductions in a fixed order, and exp, tanh, log, GELU and sigmoid with PyTorch's
// special values.
//
// Each loop runs whole vectors, then the tail through a padded buffer with the same vector code,
// so every element is computed by the same instructions. Reductions keep one vector of partial
// sums and fold it in a fixed order: a rerun on the same machine gives the same bits. Targets
// with different vector widths sum in different orders and agree within float rounding.
// NaN and Inf propagate as in PyTorch: relu(NaN) = NaN, exp(NaN) = NaN, exp(+Inf) = +Inf.

// Highway's per-target include guard: the body is compiled again for each target.
#if defined(TENSORPLAY_TENSORS_CPU_VECTOR_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TENSORPLAY_TENSORS_CPU_VECTOR_MATH_INL_H_
#undef TENSORPLAY_TENSORS_CPU_VECTOR_MATH_INL_H_
#else
#define TENSORPLAY_TENSORS_CPU_VECTOR_MATH_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

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

HWY_INLINE float Sum(const float* x, int64_t n) {
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

HWY_INLINE V sigmoid(V v) {
  const D d;
  const V one = hn::Set(d, 1.0f);
  return hn::Div(one, hn::Add(one, exp_full(hn::Neg(v))));
}

}  // namespace HWY_NAMESPACE
}  // namespace tensorplay::cpu_kernels::vec
HWY_AFTER_NAMESPACE();

#endif  // TENSORPLAY_TENSORS_CPU_VECTOR_MATH_INL_H_
