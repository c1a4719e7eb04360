// Host products through oneDNN: float32 and bfloat16 gemms, batched with strides, on the calling
// thread's thread count. Internal to the tensors layer: cpu_backend.cpp exposes them through the
// kernel table.
#pragma once

#include <cstdint>

namespace tensorplay::cpu_kernels {

/// Row-major C = alpha op(A) op(B) + beta C for `batch` matrices at fixed strides (0 broadcasts);
/// m, n > 0 and k > 0.
void gemm_f32(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
              float alpha, const float* a, int64_t lda, int64_t stride_a, const float* b,
              int64_t ldb, int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c);

/// The same on bfloat16 operands and result, accumulating in float32 and rounding each result
/// once. Returns false (computing nothing) when oneDNN has no native kernel for it on this
/// machine (no AVX-512), so the caller widens to float32 instead.
bool gemm_bf16(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
               float alpha, const uint16_t* a, int64_t lda, int64_t stride_a, const uint16_t* b,
               int64_t ldb, int64_t stride_b, float beta, uint16_t* c, int64_t ldc,
               int64_t stride_c);

/// A linear layer's forward with its bias: y[rows, out] = x[rows, in] weight[out, in]^T +
/// bias[out], the bias added to each result once its product is complete (as adding it after the
/// product would, without the extra pass over y). rows, out, in > 0.
void linear_f32(int64_t rows, int64_t out, int64_t in, const float* x, const float* weight,
                const float* bias, float* y);

/// The oneDNN kernel a float32 product of this kind runs ("sgemm" or the matmul primitive's
/// implementation name); for the benchmark and tests.
const char* gemm_f32_path(bool trans_a, bool trans_b, int64_t batch);

}  // namespace tensorplay::cpu_kernels
