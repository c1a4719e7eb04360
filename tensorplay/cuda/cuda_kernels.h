// Launchers of the CUDA kernels behind the kernel table, one group per .cu file. Each enqueues on
// the given stream and checks the launch; the caller has made the right device current.
// Internal to cuda/.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tensorplay/core/backend.h"

namespace tensorplay::cuda {

// -- cuda_elementwise.cu --------------------------------------------------------------------------

void launch_fill(float* dst, int64_t n, float value, cudaStream_t stream);
void launch_float_to_bfloat16(const float* src, uint16_t* dst, int64_t n, cudaStream_t stream);
void launch_bfloat16_to_float(const uint16_t* src, float* dst, int64_t n, cudaStream_t stream);
void launch_affine(const float* x, float* out, int64_t n, float alpha, float beta,
                   cudaStream_t stream);
void launch_binary(BinaryOp op, const float* a, const int64_t* a_strides, const float* b,
                   const int64_t* b_strides, float* out, const int64_t* shape, int rank,
                   cudaStream_t stream);
void launch_unary(UnaryOp op, const float* x, float* y, int64_t n, cudaStream_t stream);
void launch_unary_backward(UnaryOp op, const float* x, const float* y, const float* gy, float* gx,
                           int64_t n, cudaStream_t stream);

// -- cuda_reduction.cu ----------------------------------------------------------------------------

void launch_sum_dim(const float* x, float* out, int64_t outer, int64_t reduce, int64_t inner,
                    cudaStream_t stream);
/// c[i * ldc + j] = beta * c (0 when beta == 0) for an m x n matrix: gemm with k == 0.
void launch_scale_matrix(float* c, int64_t m, int64_t n, int64_t ldc, float beta,
                         cudaStream_t stream);

}  // namespace tensorplay::cuda
