// Host kernels of the optimizers (optimizer_kernels.h). foreach_target.h compiles this file once
// per x86 target; HWY_DYNAMIC_DISPATCH calls the copy for the machine. The tail runs through a
// padded buffer with the same vector code, so every element takes the same instructions.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensorplay/cpu_kernels/optimizer_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "hwy/highway.h"
#include "tensorplay/cpu_kernels/optimizer_kernels.h"
#include "tensorplay/cpu_kernels/vector_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace tensorplay::cpu_kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void AdamWUpdate(float* p, float* m, float* v, const float* g, int64_t n, const AdamWScalars& s) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const V decay = hn::Set(d, s.decay), weight1 = hn::Set(d, s.weight1);
  const V beta2 = hn::Set(d, s.beta2), weight2 = hn::Set(d, s.weight2);
  const V step_size = hn::Set(d, s.step_size), c2 = hn::Set(d, s.correction2_sqrt);
  const V eps = hn::Set(d, s.eps);
  // Separate multiplies and adds: the same bits as the scalar formula.
  auto update = [&](float* pp, float* mp, float* vp, const float* gp) {
    const V gk = hn::LoadU(d, gp), mk0 = hn::LoadU(d, mp), vk0 = hn::LoadU(d, vp);
    const V pk = hn::Mul(hn::LoadU(d, pp), decay);
    const V mk = hn::Add(mk0, hn::Mul(weight1, hn::Sub(gk, mk0)));
    const V vk = hn::Add(hn::Mul(vk0, beta2), hn::Mul(weight2, hn::Mul(gk, gk)));
    const V denom = hn::Add(hn::Div(hn::Sqrt(vk), c2), eps);
    hn::StoreU(hn::Sub(pk, hn::Mul(step_size, hn::Div(mk, denom))), d, pp);
    hn::StoreU(mk, d, mp);
    hn::StoreU(vk, d, vp);
  };
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) update(p + i, m + i, v + i, g + i);
  if (i == n) return;
  constexpr size_t kMax = HWY_MAX_BYTES / sizeof(float);
  alignas(HWY_MAX_BYTES) float tp[kMax] = {}, tm[kMax] = {}, tv[kMax] = {}, tg[kMax] = {};
  const size_t rest = static_cast<size_t>(n - i);
  std::memcpy(tp, p + i, rest * sizeof(float));
  std::memcpy(tm, m + i, rest * sizeof(float));
  std::memcpy(tv, v + i, rest * sizeof(float));
  std::memcpy(tg, g + i, rest * sizeof(float));
  update(tp, tm, tv, tg);
  std::memcpy(p + i, tp, rest * sizeof(float));
  std::memcpy(m + i, tm, rest * sizeof(float));
  std::memcpy(v + i, tv, rest * sizeof(float));
}

}  // namespace HWY_NAMESPACE
}  // namespace tensorplay::cpu_kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tensorplay::cpu_kernels {

HWY_EXPORT(AdamWUpdate);

void adamw_update(float* p, float* m, float* v, const float* g, int64_t n, const AdamWScalars& s) {
  if (vec::active()) {  // the first call chooses the dispatch target
    HWY_DYNAMIC_DISPATCH(AdamWUpdate)(p, m, v, g, n, s);
    return;
  }
  for (int64_t k = 0; k < n; ++k) {  // TENSORPLAY_CPU_ISA=scalar: the plain loop
    const float pk = p[k] * s.decay;
    const float mk = m[k] + s.weight1 * (g[k] - m[k]);
    const float vk = v[k] * s.beta2 + s.weight2 * (g[k] * g[k]);
    const float denom = std::sqrt(vk) / s.correction2_sqrt + s.eps;
    p[k] = pk - s.step_size * (mk / denom);
    m[k] = mk;
    v[k] = vk;
  }
}

}  // namespace tensorplay::cpu_kernels
#endif  // HWY_ONCE
