// Host kernels of the optimizers' updates, vectorised with Highway (one sweep per parameter).
// Internal to the tensors layer: the optimizers call them for float32 parameters on the host.
#pragma once

#include <cstdint>

namespace tensorplay::cpu_kernels {

/// The scalars of one AdamW update, as the optimizer computes them for a parameter's step.
struct AdamWScalars {
  float decay;             ///< 1 - lr * weight_decay
  float weight1;           ///< 1 - beta1
  float beta2, weight2;    ///< beta2, 1 - beta2
  float step_size;         ///< lr / bias_correction1
  float correction2_sqrt;  ///< sqrt(bias_correction2)
  float eps;
};

/// AdamW over n elements, in place on p, m and v from the gradient g. Each element takes the same
/// float operations in the same order as the scalar formula (no fused multiply-add):
///   m = m + weight1 (g - m);  v = v beta2 + weight2 g^2;
///   p = p decay - step_size (m / (sqrt(v) / correction2_sqrt + eps)).
void adamw_update(float* p, float* m, float* v, const float* g, int64_t n, const AdamWScalars& s);

}  // namespace tensorplay::cpu_kernels
