// Vector kernels that fuse a row's work: RMSNorm, SwiGLU's gate, and the fused attention's tiles
// (flash_attention.cpp). Internal to the tensors layer: callers check vec::active()
// (vector_kernels.h) and run their plain loops on the scalar target.
#pragma once

#include <cstdint>

namespace tensorplay::cpu_kernels::vec {

/// y = x / sqrt(mean(x^2) + eps) (* weight when given), rstd[r] = that factor of row r.
void rms_norm(const float* x, const float* weight, float* y, float* rstd, int64_t rows,
              int64_t cols, float eps);
/// gx from gy, given the forward's rstd.
void rms_norm_backward_input(const float* x, const float* weight, const float* rstd,
                             const float* gy, float* gx, int64_t rows, int64_t cols);
/// y = silu(gate) * up, and its gradients (either output may be null: not computed).
void silu_mul(const float* gate, const float* up, float* y, int64_t n);
void silu_mul_backward(const float* gate, const float* up, const float* gy, float* ggate,
                       float* gup, int64_t n);

// The fused attention's row work (flash_attention.cpp), on tiles of `rows` rows.

/// Online softmax of score rows s [rows, cols] in place: each row becomes exp(s - m_new) with
/// m_new = max(m[r], max of the row); l[r] = l[r] exp(m[r] - m_new) + the row's sum; m[r] = m_new;
/// rescale[r] = exp(m_old - m_new), the factor for the row's output so far. A row whose scores
/// and m[r] are all -inf (masked so far) becomes zeros with m, l kept and rescale 1.
void online_softmax_rows(float* s, int64_t rows, int64_t cols, float* m, float* l, float* rescale);
/// x[r, :] *= factors[r] for rows of n values `ld` apart (rows whose factor is 1 are left alone).
void scale_rows(float* x, int64_t rows, int64_t n, int64_t ld, const float* factors);
/// p[r, :] = exp(p[r, :] - shift[r]).
void exp_shifted_rows(float* p, int64_t rows, int64_t cols, const float* shift);
/// ds[r, :] = p[r, :] (ds[r, :] - dot[r]): softmax's backward given dot = (dO . O) per row.
void softmax_grad_rows(const float* p, float* ds, int64_t rows, int64_t cols, const float* dot);
/// out[r] = a[r, :] . b[r, :] for rows of n values `ld` apart in both.
void row_dots(const float* a, const float* b, int64_t ld, float* out, int64_t rows, int64_t n);

}  // namespace tensorplay::cpu_kernels::vec
