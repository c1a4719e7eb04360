// Host kernels of the Llama parts: one sweep per forward and per backward, no temporaries.
#include "tensorplay/cpu_kernels/llama_kernels.h"

#include <cmath>

namespace tensorplay::cpu_kernels {

void rms_norm(const float* x, const float* weight, float* y, float* rstd, int64_t rows,
              int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    double squares = 0;
    for (int64_t j = 0; j < cols; ++j) squares += static_cast<double>(xr[j]) * xr[j];
    const auto mean_square = static_cast<float>(squares / static_cast<double>(cols));
    const float inv = 1.0f / std::sqrt(mean_square + eps);
    rstd[r] = inv;
    if (weight != nullptr)
      for (int64_t j = 0; j < cols; ++j) yr[j] = xr[j] * inv * weight[j];
    else
      for (int64_t j = 0; j < cols; ++j) yr[j] = xr[j] * inv;
  }
}

// With xhat = x * rstd and g = gy * weight: gx = rstd * (g - xhat * mean(g * xhat)).
void rms_norm_backward_input(const float* x, const float* weight, const float* rstd,
                             const float* gy, float* gx, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* gr = gy + r * cols;
    float* out = gx + r * cols;
    const float inv = rstd[r];
    double dot = 0;  // sum of g * x
    if (weight != nullptr)
      for (int64_t j = 0; j < cols; ++j) dot += static_cast<double>(gr[j] * weight[j]) * xr[j];
    else
      for (int64_t j = 0; j < cols; ++j) dot += static_cast<double>(gr[j]) * xr[j];
    // mean(g * xhat) * rstd = dot * rstd^2 / cols, applied to x (xhat * rstd = x * rstd^2).
    const auto coef = static_cast<float>(dot / static_cast<double>(cols)) * inv * inv;
    if (weight != nullptr)
      for (int64_t j = 0; j < cols; ++j) out[j] = inv * (gr[j] * weight[j] - xr[j] * coef);
    else
      for (int64_t j = 0; j < cols; ++j) out[j] = inv * (gr[j] - xr[j] * coef);
  }
}

void rms_norm_backward_params(const float* x, const float* rstd, const float* gy, float* gweight,
                              int64_t rows, int64_t cols) {
  for (int64_t j = 0; j < cols; ++j) gweight[j] = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* gr = gy + r * cols;
    const float inv = rstd[r];
    for (int64_t j = 0; j < cols; ++j) gweight[j] += gr[j] * (xr[j] * inv);
  }
}

void silu_mul(const float* gate, const float* sig, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gate[i] * sig[i] * up[i];
}

// silu'(g) = s + g s (1 - s) = s (1 + g (1 - s)).
void silu_mul_backward(const float* gate, const float* sig, const float* up, const float* gy,
                       float* ggate, float* gup, int64_t n) {
  if (gup != nullptr)
    for (int64_t i = 0; i < n; ++i) gup[i] = gy[i] * (gate[i] * sig[i]);
  if (ggate != nullptr)
    for (int64_t i = 0; i < n; ++i)
      ggate[i] = gy[i] * up[i] * (sig[i] * (1.0f + gate[i] * (1.0f - sig[i])));
}

void rotary(const float* x, const float* cos, const float* sin, float* y, int64_t outer,
            int64_t time, int64_t inner, int64_t dim, bool transpose) {
  const int64_t half = dim / 2;
  for (int64_t row = 0; row < outer * time * inner; ++row) {
    const int64_t t = row / inner % time;
    const float* xr = x + row * dim;
    const float* c = cos + t * dim;
    const float* s = sin + t * dim;
    float* yr = y + row * dim;
    if (!transpose) {
      for (int64_t j = 0; j < half; ++j) yr[j] = xr[j] * c[j] + (-xr[j + half]) * s[j];
      for (int64_t j = 0; j < half; ++j)
        yr[j + half] = xr[j + half] * c[j + half] + xr[j] * s[j + half];
    } else {
      for (int64_t j = 0; j < half; ++j) yr[j] = xr[j] * c[j] + xr[j + half] * s[j + half];
      for (int64_t j = 0; j < half; ++j) yr[j + half] = xr[j + half] * c[j + half] - xr[j] * s[j];
    }
  }
}

}  // namespace tensorplay::cpu_kernels
