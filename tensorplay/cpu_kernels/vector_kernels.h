// Host kernels vectorised with Highway, compiled for every x86 vector unit (SSE4, AVX2, AVX-512)
// and dispatched at run time to the one chosen by cpu_isa.h. Internal to the tensors layer:
// cpu_backend.cpp calls them unless the scalar target is chosen, which runs the plain loops
// instead.
#pragma once

#include <cstdint>

#include "tensorplay/core/backend.h"
#include "tensorplay/core/cpu_isa.h"

namespace tensorplay::cpu_kernels::vec {

/// Whether the vector kernels run (false when TENSORPLAY_CPU_ISA=scalar).
inline bool active() { return cpu_isa_is_vector(); }

/// out[i] = a[i * a_step] op b[i * b_step] for i < n, with steps 0 (a scalar) or 1.
void binary_row(BinaryOp op, const float* a, int a_step, const float* b, int b_step, float* out,
                int64_t n);
void affine(const float* x, float* out, int64_t n, float alpha, float beta);
void unary(UnaryOp op, const float* x, float* y, int64_t n);
void unary_backward(UnaryOp op, const float* x, const float* y, const float* gy, float* gx,
                    int64_t n);
void sum_dim(const float* x, float* out, int64_t outer, int64_t reduce, int64_t inner);

/// Softmax over rows of n contiguous values (inner == 1 of the kernel table's layout).
void softmax_rows(const float* x, float* y, int64_t rows, int64_t n, bool log);
void softmax_rows_backward(const float* y, const float* gy, float* gx, int64_t rows, int64_t n,
                           bool log);
void causal_softmax(const float* x, float* y, int64_t batch, int64_t t_q, int64_t t_k);

void layer_norm(const float* x, const float* weight, const float* bias, float* y, float* mean,
                float* rstd, int64_t rows, int64_t cols, float eps);
void layer_norm_backward_input(const float* x, const float* weight, const float* mean,
                               const float* rstd, const float* gy, float* gx, int64_t rows,
                               int64_t cols);
void layer_norm_backward_params(const float* x, const float* mean, const float* rstd,
                                const float* gy, float* gweight, float* gbias, int64_t rows,
                                int64_t cols);

void embedding_backward(const float* ids, const float* gy, float* gweight, int64_t n, int64_t dim,
                        int64_t vocab);
void cross_entropy_backward(const float* logp, const float* targets, const float* grad_rows,
                            float* gx, int64_t rows, int64_t classes, int64_t ignore_index);

}  // namespace tensorplay::cpu_kernels::vec
