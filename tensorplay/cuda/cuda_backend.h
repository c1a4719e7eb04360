// The CUDA kernel table: the Backend interface implemented with CUDA kernels and cuBLAS. Methods
// are defined in the .cu file of their group (memory and products in cuda_backend.cu, the
// launchers in cuda_elementwise.cu, cuda_reduction.cu, ...). Internal to cuda/.
#pragma once

#include <cuda_runtime.h>

#include "tensorplay/core/backend.h"

namespace tensorplay::cuda {

/// Every method makes the device owning its output current, and enqueues on that device's stream
/// (cuda_device.h); only copies that touch host memory and synchronize() block the host.
class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "cuda"; }

  // -- memory (cuda_backend.cu) ------------------------------------------------------------------
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t bytes) const override;
  void fill(float* dst, int64_t n, float value) const override;
  void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype,
               int64_t n) const override;
  void synchronize() const override;

  // -- products (cuda_blas.cu) -------------------------------------------------------------------
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
            int64_t ldc) const override;
  void gemm_batched(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                    float alpha, const float* a, int64_t lda, int64_t stride_a, const float* b,
                    int64_t ldb, int64_t stride_b, float beta, float* c, int64_t ldc,
                    int64_t stride_c) const override;

  void gemm_batched_bf16(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                         float alpha, const uint16_t* a, int64_t lda, int64_t stride_a,
                         const uint16_t* b, int64_t ldb, int64_t stride_b, float beta, uint16_t* c,
                         int64_t ldc, int64_t stride_c) const override;

  // -- elementwise and reductions (cuda_backend.cu, launchers in cuda_elementwise.cu) ------------
  void binary(BinaryOp op, const float* a, const int64_t* a_strides, const float* b,
              const int64_t* b_strides, float* out, const int64_t* shape, int rank) const override;
  void affine(const float* x, float* out, int64_t n, float alpha, float beta) const override;
  void unary(UnaryOp op, const float* x, float* y, int64_t n) const override;
  void unary_backward(UnaryOp op, const float* x, const float* y, const float* gy, float* gx,
                      int64_t n) const override;
  void sum_dim(const float* x, float* out, int64_t outer, int64_t reduce,
               int64_t inner) const override;

  // -- neural-network kernels (cuda_nn_backend.cu, launchers in cuda_nn_kernels.cu) -------------
  void strided_copy(const float* x, const int64_t* x_strides, float* y, const int64_t* shape,
                    int rank) const override;
  void softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
               bool log) const override;
  void softmax_backward(const float* y, const float* gy, float* gx, int64_t outer, int64_t n,
                        int64_t inner, bool log) const override;
  void causal_softmax(const float* x, float* y, int64_t batch, int64_t t_q,
                      int64_t t_k) const override;
  void layer_norm(const float* x, const float* weight, const float* bias, float* y, float* mean,
                  float* rstd, int64_t rows, int64_t cols, float eps) const override;
  void layer_norm_backward_input(const float* x, const float* weight, const float* mean,
                                 const float* rstd, const float* gy, float* gx, int64_t rows,
                                 int64_t cols) const override;
  void layer_norm_backward_params(const float* x, const float* mean, const float* rstd,
                                  const float* gy, float* gweight, float* gbias, int64_t rows,
                                  int64_t cols) const override;
  void embedding(const float* ids, const float* weight, float* out, int64_t n,
                 int64_t dim) const override;
  void embedding_backward(const float* ids, const float* gy, float* gweight, int64_t n, int64_t dim,
                          int64_t vocab) const override;
  void nll_rows(const float* logp, const float* targets, float* loss, int64_t rows, int64_t classes,
                int64_t ignore_index) const override;
  void cross_entropy_backward(const float* logp, const float* targets, const float* grad_rows,
                              float* gx, int64_t rows, int64_t classes,
                              int64_t ignore_index) const override;
};

}  // namespace tensorplay::cuda
