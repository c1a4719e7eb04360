// Host kernels for the neural-network ops (layout copies, softmax, layer norm, embedding, cross
// entropy). Internal to the tensors layer: cpu_backend.cpp exposes them through the kernel table.
#pragma once

#include <cstdint>

namespace tensorplay::cpu_kernels {

void strided_copy(const float* x, const int64_t* x_strides, float* y, const int64_t* shape,
                  int rank);

void softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log);
void softmax_backward(const float* y, const float* gy, float* gx, int64_t outer, int64_t n,
                      int64_t inner, bool log);
void causal_softmax(const float* x, float* y, int64_t batch, int64_t t_q, int64_t t_k);

void layer_norm(const float* x, const float* weight, const float* bias, float* y, float* mean,
                float* rstd, int64_t rows, int64_t cols, float eps);
void layer_norm_backward_input(const float* x, const float* weight, const float* mean,
                               const float* rstd, const float* gy, float* gx, int64_t rows,
                               int64_t cols);
void layer_norm_backward_params(const float* x, const float* mean, const float* rstd,
                                const float* gy, float* gweight, float* gbias, int64_t rows,
                                int64_t cols);

void embedding(const float* ids, const float* weight, float* out, int64_t n, int64_t dim);
void embedding_backward(const float* ids, const float* gy, float* gweight, int64_t n, int64_t dim,
                        int64_t vocab);

void nll_rows(const float* logp, const float* targets, float* loss, int64_t rows, int64_t classes,
              int64_t ignore_index);
void cross_entropy_backward(const float* logp, const float* targets, const float* grad_rows,
                            float* gx, int64_t rows, int64_t classes, int64_t ignore_index);

}  // namespace tensorplay::cpu_kernels
