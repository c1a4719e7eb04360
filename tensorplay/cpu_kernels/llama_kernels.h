// Host kernels of the Llama parts (RMS norm, SiLU-gated product, rotary positions), plain loops
// the compiler vectorises. Internal to the tensors layer: cpu_backend.cpp exposes them in the
// kernel table.
#pragma once

#include <cstdint>

namespace tensorplay::cpu_kernels {

void rms_norm(const float* x, const float* weight, float* y, float* rstd, int64_t rows,
              int64_t cols, float eps);
void rms_norm_backward_input(const float* x, const float* weight, const float* rstd,
                             const float* gy, float* gx, int64_t rows, int64_t cols);
void rms_norm_backward_params(const float* x, const float* rstd, const float* gy, float* gweight,
                              int64_t rows, int64_t cols);

/// y = gate * sig * up, where sig = sigmoid(gate) is given (computed by the unary kernel).
void silu_mul(const float* gate, const float* sig, const float* up, float* y, int64_t n);
/// Gradients of silu_mul from sig = sigmoid(gate); ggate or gup may be null.
void silu_mul_backward(const float* gate, const float* sig, const float* up, const float* gy,
                       float* ggate, float* gup, int64_t n);

/// Backend::rotary: rows of `dim` laid out [outer, time, inner], row (o, t, i) at position t.
void rotary(const float* x, const float* cos, const float* sin, float* y, int64_t outer,
            int64_t time, int64_t inner, int64_t dim, bool transpose);

}  // namespace tensorplay::cpu_kernels
