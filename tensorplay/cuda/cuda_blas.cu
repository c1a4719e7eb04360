// Float32 and bfloat16 products on CUDA through cuBLAS. cuBLAS is column-major: a row-major C =
// op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, so the operands are swapped and m and n
// exchanged.
#include <climits>
#include <stdexcept>
#include <string>

#include "tensorplay/cuda/cuda_backend.h"
#include "tensorplay/cuda/cuda_check.h"
#include "tensorplay/cuda/cuda_device.h"
#include "tensorplay/cuda/cuda_kernels.h"

namespace tensorplay::cuda {
namespace {

int checked_int(int64_t value, const char* what) {
  if (value < 0 || value > INT_MAX)
    throw std::invalid_argument(std::string("cuBLAS gemm: ") + what + " = " +
                                std::to_string(value) +
                                " does not fit cuBLAS's 32-bit sizes; split the product");
  return static_cast<int>(value);
}

cublasOperation_t op_of(bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

void CudaBackend::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                       const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                       float* c, int64_t ldc) const {
  if (m == 0 || n == 0) return;
  int d = device_of(c);
  DeviceGuard guard(d);
  if (k == 0) {
    launch_scale_matrix(c, m, n, ldc, beta, stream(d));
    return;
  }
  TP_CUBLAS_CHECK(cublasSgemm(cublas_handle(d), op_of(trans_b), op_of(trans_a), checked_int(n, "n"),
                              checked_int(m, "m"), checked_int(k, "k"), &alpha, b,
                              checked_int(ldb, "ldb"), a, checked_int(lda, "lda"), &beta, c,
                              checked_int(ldc, "ldc")));
}

void CudaBackend::gemm_batched(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n,
                               int64_t k, float alpha, const float* a, int64_t lda,
                               int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                               float beta, float* c, int64_t ldc, int64_t stride_c) const {
  if (batch == 0 || m == 0 || n == 0) return;
  int d = device_of(c);
  DeviceGuard guard(d);
  if (k == 0) {
    for (int64_t i = 0; i < batch; ++i)
      launch_scale_matrix(c + i * stride_c, m, n, ldc, beta, stream(d));
    return;
  }
  TP_CUBLAS_CHECK(cublasSgemmStridedBatched(
      cublas_handle(d), op_of(trans_b), op_of(trans_a), checked_int(n, "n"), checked_int(m, "m"),
      checked_int(k, "k"), &alpha, b, checked_int(ldb, "ldb"), stride_b, a, checked_int(lda, "lda"),
      stride_a, &beta, c, checked_int(ldc, "ldc"), stride_c, checked_int(batch, "batch")));
}

void CudaBackend::gemm_batched_bf16(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n,
                                    int64_t k, float alpha, const uint16_t* a, int64_t lda,
                                    int64_t stride_a, const uint16_t* b, int64_t ldb,
                                    int64_t stride_b, float beta, uint16_t* c, int64_t ldc,
                                    int64_t stride_c) const {
  if (batch == 0 || m == 0 || n == 0) return;
  int d = device_of(c);
  DeviceGuard guard(d);
  if (k == 0) {
    if (beta == 1.0f) return;
    if (beta != 0.0f)
      throw std::invalid_argument("bfloat16 gemm with k = 0 supports beta 0 or 1 only");
    for (int64_t i = 0; i < batch; ++i)  // m rows of n elements, ldc apart
      TP_CUDA_CHECK(cudaMemset2DAsync(c + i * stride_c, ldc * sizeof(uint16_t), 0,
                                      n * sizeof(uint16_t), m, stream(d)));
    return;
  }
  // bfloat16 operands and result, float32 accumulation (tensor cores where the GPU has them).
  TP_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas_handle(d), op_of(trans_b), op_of(trans_a), checked_int(n, "n"), checked_int(m, "m"),
      checked_int(k, "k"), &alpha, b, CUDA_R_16BF, checked_int(ldb, "ldb"), stride_b, a,
      CUDA_R_16BF, checked_int(lda, "lda"), stride_a, &beta, c, CUDA_R_16BF,
      checked_int(ldc, "ldc"), stride_c, checked_int(batch, "batch"), CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
}

}  // namespace tensorplay::cuda
