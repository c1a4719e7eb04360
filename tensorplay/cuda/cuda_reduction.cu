// Reduction CUDA kernels: sum over the middle of an [outer, reduce, inner] view. Deterministic
// (no atomics): the same input always gives the same bits.
#include "tensorplay/cuda/cuda_check.h"
#include "tensorplay/cuda/cuda_device.h"
#include "tensorplay/cuda/cuda_kernels.h"

namespace tensorplay::cuda {
namespace {

constexpr int kRowBlock = 256;

/// inner > 1: one thread per output element walks the reduced dimension; neighbouring threads
/// read neighbouring addresses, so loads coalesce.
__global__ void sum_columns_kernel(const float* x, float* out, int64_t outer, int64_t reduce,
                                   int64_t inner) {
  int64_t total = outer * inner;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t o = i / inner, j = i % inner;
    const float* src = x + o * reduce * inner + j;
    float acc = 0.0f;
    for (int64_t r = 0; r < reduce; ++r) acc += src[r * inner];
    out[i] = acc;
  }
}

/// inner == 1: one block per row sums a contiguous row with a shared-memory tree.
__global__ void sum_rows_kernel(const float* x, float* out, int64_t outer, int64_t reduce) {
  __shared__ float partial[kRowBlock];
  for (int64_t row = blockIdx.x; row < outer; row += gridDim.x) {
    const float* src = x + row * reduce;
    float acc = 0.0f;
    for (int64_t r = threadIdx.x; r < reduce; r += blockDim.x) acc += src[r];
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int width = blockDim.x / 2; width > 0; width /= 2) {
      if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[row] = partial[0];
    __syncthreads();
  }
}

__global__ void scale_matrix_kernel(float* c, int64_t m, int64_t n, int64_t ldc, float beta) {
  int64_t total = m * n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    float* p = c + (i / n) * ldc + i % n;
    *p = beta == 0.0f ? 0.0f : beta * *p;
  }
}

}  // namespace

void launch_sum_dim(const float* x, float* out, int64_t outer, int64_t reduce, int64_t inner,
                    cudaStream_t stream) {
  if (outer <= 0 || inner <= 0) return;
  if (reduce <= 0) {
    TP_CUDA_CHECK(
        cudaMemsetAsync(out, 0, static_cast<size_t>(outer * inner) * sizeof(float), stream));
    return;
  }
  if (inner == 1 && reduce >= 64) {
    unsigned blocks = static_cast<unsigned>(outer < 65535 * 8 ? outer : 65535 * 8);
    sum_rows_kernel<<<blocks, kRowBlock, 0, stream>>>(x, out, outer, reduce);
  } else {
    sum_columns_kernel<<<grid_for(outer * inner), kBlockSize, 0, stream>>>(x, out, outer, reduce,
                                                                           inner);
  }
  TP_CUDA_CHECK_LAUNCH();
}

void launch_scale_matrix(float* c, int64_t m, int64_t n, int64_t ldc, float beta,
                         cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  scale_matrix_kernel<<<grid_for(m * n), kBlockSize, 0, stream>>>(c, m, n, ldc, beta);
  TP_CUDA_CHECK_LAUNCH();
}

}  // namespace tensorplay::cuda
