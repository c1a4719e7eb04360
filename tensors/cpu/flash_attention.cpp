// Fused host attention (flash_attention.h). Per head, queries go in tiles of kRows rows and keys
// in blocks of kCols; a tile's scores S = scale Q K^T live in a kRows x kCols buffer only.
//
// Forward (online softmax): each row keeps its running max m and sum l; a new block's scores
// become exp(S - m_new), the row's output so far is rescaled by exp(m_old - m_new), and the block's
// P V is added. At the end out /= l and lse = m + log l.
// Backward (FlashAttention-2): D_i = dO_i . O_i; for every block, P = exp(S - lse) recomputed,
// dV += P^T dO, dP = dO V^T, dS = P (dP - D), dQ += scale dS K, dK += scale dS^T Q.
// Under the causal mask blocks entirely above the diagonal are skipped (half the work of the
// plain path, which computes every score and masks it). Tiles run in a fixed order: a rerun gives
// the same bits.
#include "tensors/cpu/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensors/cpu/onednn_products.h"
#include "tensors/cpu/row_kernels.h"
#include "tensors/cpu/vector_kernels.h"

namespace tensorplay::cpu_kernels {
namespace {

constexpr int64_t kRows = 64;  // queries per tile
// Keys per block: a 64 x 256 tile of scores (64 KiB) stays in the core's cache, and fewer, larger
// products than 64-key blocks spend less in each call's dispatch (measured 10-15% faster at
// T = 2048, the same at T = 128).
constexpr int64_t kCols = 256;

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// Row-major gemm on tiles: C = alpha op(A) op(B) + beta C.
void tile_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
               int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0 || k == 0) return;
  gemm_f32(ta, tb, 1, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0);
}

// Scores of query rows [i0, i0 + rows) against keys [j0, j0 + cols) into s (ld = cols), masked
// to -inf above the diagonal under the causal mask.
void scores(const float* q, const float* k, float* s, int64_t i0, int64_t rows, int64_t j0,
            int64_t cols, int64_t d, float scale, bool causal) {
  tile_gemm(false, true, rows, cols, d, scale, q + i0 * d, d, k + j0 * d, d, 0.0f, s, cols);
  if (!causal) return;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t first_masked = std::max<int64_t>(i0 + r + 1 - j0, 0);
    for (int64_t c = first_masked; c < cols; ++c) s[r * cols + c] = kMinusInf;
  }
}

// The row work on a tile: the vector kernels (vector_kernels.h states each), or plain loops when
// the scalar target is chosen.
void online_softmax(const Backend& be, float* s, int64_t rows, int64_t cols, float* m, float* l,
                    float* rescale) {
  if (vec::active()) return vec::online_softmax_rows(s, rows, cols, m, l, rescale);
  for (int64_t r = 0; r < rows; ++r) {
    float* sr = s + r * cols;
    float mx = m[r];
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, sr[c]);
    rescale[r] = 1.0f;
    if (mx == kMinusInf) {  // every key so far is masked for this row: it adds nothing
      std::fill(sr, sr + cols, 0.0f);
      continue;
    }
    be.affine(sr, sr, cols, 1.0f, -mx);
    be.unary(UnaryOp::Exp, sr, sr, cols);
    rescale[r] = std::exp(m[r] - mx);
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) sum += sr[c];
    l[r] = l[r] * rescale[r] + sum;
    m[r] = mx;
  }
}

void scale_rows(const Backend& be, float* x, int64_t rows, int64_t n, const float* factors) {
  if (vec::active()) return vec::scale_rows(x, rows, n, factors);
  for (int64_t r = 0; r < rows; ++r)
    if (factors[r] != 1.0f) be.affine(x + r * n, x + r * n, n, factors[r], 0.0f);
}

void exp_shifted(const Backend& be, float* p, int64_t rows, int64_t cols, const float* shift) {
  if (vec::active()) return vec::exp_shifted_rows(p, rows, cols, shift);
  for (int64_t r = 0; r < rows; ++r) {
    be.affine(p + r * cols, p + r * cols, cols, 1.0f, -shift[r]);
    be.unary(UnaryOp::Exp, p + r * cols, p + r * cols, cols);
  }
}

void softmax_grad(const float* p, float* ds, int64_t rows, int64_t cols, const float* dot) {
  if (vec::active()) return vec::softmax_grad_rows(p, ds, rows, cols, dot);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      ds[r * cols + c] = p[r * cols + c] * (ds[r * cols + c] - dot[r]);
}

void row_dots(const float* a, const float* b, float* out, int64_t rows, int64_t n) {
  if (vec::active()) return vec::row_dots(a, b, out, rows, n);
  for (int64_t r = 0; r < rows; ++r) {
    float acc = 0.0f;
    for (int64_t c = 0; c < n; ++c) acc += a[r * n + c] * b[r * n + c];
    out[r] = acc;
  }
}

// Keys visible to some row of a tile ending (exclusive) at row i1.
int64_t visible_keys(int64_t i1, int64_t t_k, bool causal) {
  return causal ? std::min(i1, t_k) : t_k;
}

}  // namespace

void flash_attention(const Backend& be, const float* q, const float* k, const float* v, float* out,
                     float* lse, int64_t batch, int64_t t_q, int64_t t_k, int64_t d, int64_t d_v,
                     float scale, bool causal) {
  std::vector<float> s(kRows * kCols), m(kRows), l(kRows), rescale(kRows);
  for (int64_t b = 0; b < batch; ++b) {
    const float* qb = q + b * t_q * d;
    const float* kb = k + b * t_k * d;
    const float* vb = v + b * t_k * d_v;
    float* ob = out + b * t_q * d_v;
    float* lb = lse + b * t_q;
    for (int64_t i0 = 0; i0 < t_q; i0 += kRows) {
      const int64_t rows = std::min(kRows, t_q - i0);
      std::fill(m.begin(), m.end(), kMinusInf);
      std::fill(l.begin(), l.end(), 0.0f);
      std::fill(ob + i0 * d_v, ob + (i0 + rows) * d_v, 0.0f);
      const int64_t keys = visible_keys(i0 + rows, t_k, causal);
      for (int64_t j0 = 0; j0 < keys; j0 += kCols) {
        const int64_t cols = std::min(kCols, keys - j0);
        scores(qb, kb, s.data(), i0, rows, j0, cols, d, scale, causal);
        // exp(S - m_new) in place, and the output so far rescaled to the new max.
        online_softmax(be, s.data(), rows, cols, m.data(), l.data(), rescale.data());
        scale_rows(be, ob + i0 * d_v, rows, d_v, rescale.data());
        tile_gemm(false, false, rows, d_v, cols, 1.0f, s.data(), cols, vb + j0 * d_v, d_v, 1.0f,
                  ob + i0 * d_v, d_v);
      }
      for (int64_t r = 0; r < rows; ++r) {
        rescale[r] = 1.0f / l[r];
        lb[i0 + r] = m[r] + std::log(l[r]);
      }
      scale_rows(be, ob + i0 * d_v, rows, d_v, rescale.data());
    }
  }
}

void flash_attention_backward(const Backend& be, const float* q, const float* k, const float* v,
                              const float* out, const float* lse, const float* gout, float* gq,
                              float* gk, float* gv, int64_t batch, int64_t t_q, int64_t t_k,
                              int64_t d, int64_t d_v, float scale, bool causal) {
  std::vector<float> p(kRows * kCols), dp(kRows * kCols), dot(t_q);
  // Gradients not asked for are still needed as scratch for the others' recurrences per head.
  std::vector<float> gq_head, gk_head, gv_head;
  if (!gq) gq_head.resize(t_q * d);
  if (!gk) gk_head.resize(t_k * d);
  if (!gv) gv_head.resize(t_k * d_v);
  for (int64_t b = 0; b < batch; ++b) {
    const float* qb = q + b * t_q * d;
    const float* kb = k + b * t_k * d;
    const float* vb = v + b * t_k * d_v;
    const float* ob = out + b * t_q * d_v;
    const float* gob = gout + b * t_q * d_v;
    const float* lb = lse + b * t_q;
    float* gqb = gq ? gq + b * t_q * d : gq_head.data();
    float* gkb = gk ? gk + b * t_k * d : gk_head.data();
    float* gvb = gv ? gv + b * t_k * d_v : gv_head.data();
    std::fill(gqb, gqb + t_q * d, 0.0f);
    std::fill(gkb, gkb + t_k * d, 0.0f);
    std::fill(gvb, gvb + t_k * d_v, 0.0f);
    row_dots(gob, ob, dot.data(), t_q, d_v);
    for (int64_t i0 = 0; i0 < t_q; i0 += kRows) {
      const int64_t rows = std::min(kRows, t_q - i0);
      const int64_t keys = visible_keys(i0 + rows, t_k, causal);
      for (int64_t j0 = 0; j0 < keys; j0 += kCols) {
        const int64_t cols = std::min(kCols, keys - j0);
        scores(qb, kb, p.data(), i0, rows, j0, cols, d, scale, causal);
        exp_shifted(be, p.data(), rows, cols, lb + i0);  // P = exp(S - lse); masked scores give 0
        // dV_j += P^T dO_i
        tile_gemm(true, false, cols, d_v, rows, 1.0f, p.data(), cols, gob + i0 * d_v, d_v, 1.0f,
                  gvb + j0 * d_v, d_v);
        // dP = dO_i V_j^T, then dS = P (dP - D_i) in dp
        tile_gemm(false, true, rows, cols, d_v, 1.0f, gob + i0 * d_v, d_v, vb + j0 * d_v, d_v, 0.0f,
                  dp.data(), cols);
        softmax_grad(p.data(), dp.data(), rows, cols, dot.data() + i0);
        // dQ_i += scale dS K_j; dK_j += scale dS^T Q_i
        tile_gemm(false, false, rows, d, cols, scale, dp.data(), cols, kb + j0 * d, d, 1.0f,
                  gqb + i0 * d, d);
        tile_gemm(true, false, cols, d, rows, scale, dp.data(), cols, qb + i0 * d, d, 1.0f,
                  gkb + j0 * d, d);
      }
    }
  }
}

}  // namespace tensorplay::cpu_kernels
