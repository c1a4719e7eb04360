// Launchers of the CUDA neural-network kernels (cuda_nn_kernels.cu), with the semantics of the
// matching Backend entries in tensorplay/core/backend.h. Each enqueues on `stream`; the caller has
// made the right device current. Internal to cuda/.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tensorplay::cuda {

void launch_strided_copy(const float* x, const int64_t* x_strides, float* y, const int64_t* shape,
                         int rank, cudaStream_t stream);

void launch_softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log,
                    cudaStream_t stream);
void launch_softmax_backward(const float* y, const float* gy, float* gx, int64_t outer, int64_t n,
                             int64_t inner, bool log, cudaStream_t stream);
void launch_causal_softmax(const float* x, float* y, int64_t batch, int64_t t_q, int64_t t_k,
                           cudaStream_t stream);

void launch_layer_norm(const float* x, const float* weight, const float* bias, float* y,
                       float* mean, float* rstd, int64_t rows, int64_t cols, float eps,
                       cudaStream_t stream);
void launch_layer_norm_backward_input(const float* x, const float* weight, const float* mean,
                                      const float* rstd, const float* gy, float* gx, int64_t rows,
                                      int64_t cols, cudaStream_t stream);
void launch_layer_norm_backward_params(const float* x, const float* mean, const float* rstd,
                                       const float* gy, float* gweight, float* gbias, int64_t rows,
                                       int64_t cols, cudaStream_t stream);

void launch_embedding(const float* ids, const float* weight, float* out, int64_t n, int64_t dim,
                      cudaStream_t stream);
void launch_embedding_backward(const float* ids, const float* gy, float* gweight, int64_t n,
                               int64_t dim, int64_t vocab, cudaStream_t stream);

void launch_nll_rows(const float* logp, const float* targets, float* loss, int64_t rows,
                     int64_t classes, int64_t ignore_index, cudaStream_t stream);
void launch_cross_entropy_backward(const float* logp, const float* targets, const float* grad_rows,
                                   float* gx, int64_t rows, int64_t classes, int64_t ignore_index,
                                   cudaStream_t stream);

}  // namespace tensorplay::cuda
