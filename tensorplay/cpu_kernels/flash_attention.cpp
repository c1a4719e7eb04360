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
// the same bits. Each operand's rows may lie apart (a head's rows inside a [B, T, 3, H, D]
// projection): the products take the row stride as their leading dimension.
#include "tensorplay/cpu_kernels/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensorplay/cpu_kernels/onednn_products.h"
#include "tensorplay/cpu_kernels/row_kernels.h"
#include "tensorplay/cpu_kernels/vector_kernels.h"

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

// One head's operand: its first row and the distance between rows.
struct Rows {
  const float* at;
  int64_t ld;
  const float* row(int64_t i) const { return at + i * ld; }
};
struct MutableRows {
  float* at;
  int64_t ld;
  float* row(int64_t i) const { return at + i * ld; }
  // Zeroes rows [i0, i0 + rows) of n values.
  void zero(int64_t i0, int64_t rows, int64_t n) const {
    for (int64_t r = i0; r < i0 + rows; ++r) std::fill(row(r), row(r) + n, 0.0f);
  }
};

// Scores of query rows [i0, i0 + rows) against keys [j0, j0 + cols) into s (ld = cols), masked
// to -inf above the diagonal under the causal mask.
void scores(Rows q, Rows k, float* s, int64_t i0, int64_t rows, int64_t j0, int64_t cols, int64_t d,
            float scale, bool causal) {
  tile_gemm(false, true, rows, cols, d, scale, q.row(i0), q.ld, k.row(j0), k.ld, 0.0f, s, cols);
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

void scale_rows(const Backend& be, MutableRows x, int64_t i0, int64_t rows, int64_t n,
                const float* factors) {
  if (vec::active()) return vec::scale_rows(x.row(i0), rows, n, x.ld, factors);
  for (int64_t r = 0; r < rows; ++r)
    if (factors[r] != 1.0f) be.affine(x.row(i0 + r), x.row(i0 + r), n, factors[r], 0.0f);
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

// out[r] = a's row r . b's row r (a and b lie alike: the output and its gradient).
void row_dots(Rows a, Rows b, float* out, int64_t rows, int64_t n) {
  if (vec::active()) return vec::row_dots(a.at, b.at, a.ld, out, rows, n);
  for (int64_t r = 0; r < rows; ++r) {
    float acc = 0.0f;
    for (int64_t c = 0; c < n; ++c) acc += a.row(r)[c] * b.row(r)[c];
    out[r] = acc;
  }
}

// Keys visible to some row of a tile ending (exclusive) at row i1.
int64_t visible_keys(int64_t i1, int64_t t_k, bool causal) {
  return causal ? std::min(i1, t_k) : t_k;
}

}  // namespace

void flash_attention(const Backend& be, const AttentionGeometry& g, const float* q, const float* k,
                     const float* v, float* out, float* lse) {
  const int64_t t_q = g.t_q, t_k = g.t_k, d = g.d, d_v = g.d_v;
  std::vector<float> s(kRows * kCols), m(kRows), l(kRows), rescale(kRows);
  for (int64_t b = 0; b < g.batch(); ++b) {
    const int64_t group = b / g.heads, head = b % g.heads;
    const Rows qb{q + g.q.offset(group, head), g.q.row};
    const Rows kb{k + g.k.offset(group, head), g.k.row};
    const Rows vb{v + g.v.offset(group, head), g.v.row};
    const MutableRows ob{out + g.out.offset(group, head), g.out.row};
    float* lb = lse + b * t_q;
    for (int64_t i0 = 0; i0 < t_q; i0 += kRows) {
      const int64_t rows = std::min(kRows, t_q - i0);
      std::fill(m.begin(), m.end(), kMinusInf);
      std::fill(l.begin(), l.end(), 0.0f);
      ob.zero(i0, rows, d_v);
      const int64_t keys = visible_keys(i0 + rows, t_k, g.causal);
      for (int64_t j0 = 0; j0 < keys; j0 += kCols) {
        const int64_t cols = std::min(kCols, keys - j0);
        scores(qb, kb, s.data(), i0, rows, j0, cols, d, g.scale, g.causal);
        // exp(S - m_new) in place, and the output so far rescaled to the new max.
        online_softmax(be, s.data(), rows, cols, m.data(), l.data(), rescale.data());
        scale_rows(be, ob, i0, rows, d_v, rescale.data());
        tile_gemm(false, false, rows, d_v, cols, 1.0f, s.data(), cols, vb.row(j0), vb.ld, 1.0f,
                  ob.row(i0), ob.ld);
      }
      for (int64_t r = 0; r < rows; ++r) {
        rescale[r] = 1.0f / l[r];
        lb[i0 + r] = m[r] + std::log(l[r]);
      }
      scale_rows(be, ob, i0, rows, d_v, rescale.data());
    }
  }
}

namespace {

// One head's backward over its tiles (the file's opening comment). `p`, `dp` are kRows x kCols
// scratch; `dot` holds D = dO . O per query row.
void head_backward(const Backend& be, const AttentionGeometry& g, Rows q, Rows k, Rows v, Rows gout,
                   const float* lse, const float* dot, MutableRows gq, MutableRows gk,
                   MutableRows gv, float* p, float* dp) {
  const int64_t d = g.d, d_v = g.d_v;
  for (int64_t i0 = 0; i0 < g.t_q; i0 += kRows) {
    const int64_t rows = std::min(kRows, g.t_q - i0);
    const int64_t keys = visible_keys(i0 + rows, g.t_k, g.causal);
    for (int64_t j0 = 0; j0 < keys; j0 += kCols) {
      const int64_t cols = std::min(kCols, keys - j0);
      scores(q, k, p, i0, rows, j0, cols, d, g.scale, g.causal);
      exp_shifted(be, p, rows, cols, lse + i0);  // P = exp(S - lse); masked scores give 0
      // dV_j += P^T dO_i
      tile_gemm(true, false, cols, d_v, rows, 1.0f, p, cols, gout.row(i0), gout.ld, 1.0f,
                gv.row(j0), gv.ld);
      // dP = dO_i V_j^T, then dS = P (dP - D_i) in dp
      tile_gemm(false, true, rows, cols, d_v, 1.0f, gout.row(i0), gout.ld, v.row(j0), v.ld, 0.0f,
                dp, cols);
      softmax_grad(p, dp, rows, cols, dot + i0);
      // dQ_i += scale dS K_j; dK_j += scale dS^T Q_i
      tile_gemm(false, false, rows, d, cols, g.scale, dp, cols, k.row(j0), k.ld, 1.0f, gq.row(i0),
                gq.ld);
      tile_gemm(true, false, cols, d, rows, g.scale, dp, cols, q.row(i0), q.ld, 1.0f, gk.row(j0),
                gk.ld);
    }
  }
}

}  // namespace

void flash_attention_backward(const Backend& be, const AttentionGeometry& g, const float* q,
                              const float* k, const float* v, const float* out, const float* lse,
                              const float* gout, float* gq, float* gk, float* gv) {
  std::vector<float> p(kRows * kCols), dp(kRows * kCols), dot(g.t_q);
  // Gradients not asked for are still needed as scratch for the others' recurrences per head.
  std::vector<float> gq_head, gk_head, gv_head;
  if (!gq) gq_head.resize(g.t_q * g.d);
  if (!gk) gk_head.resize(g.t_k * g.d);
  if (!gv) gv_head.resize(g.t_k * g.d_v);
  for (int64_t b = 0; b < g.batch(); ++b) {
    const int64_t group = b / g.heads, head = b % g.heads;
    auto grad = [&](float* all, const HeadStrides& at, std::vector<float>& scratch, int64_t n) {
      return all ? MutableRows{all + at.offset(group, head), at.row}
                 : MutableRows{scratch.data(), n};
    };
    const MutableRows gqb = grad(gq, g.q, gq_head, g.d);
    const MutableRows gkb = grad(gk, g.k, gk_head, g.d);
    const MutableRows gvb = grad(gv, g.v, gv_head, g.d_v);
    gqb.zero(0, g.t_q, g.d);
    gkb.zero(0, g.t_k, g.d);
    gvb.zero(0, g.t_k, g.d_v);
    const Rows gob{gout + g.out.offset(group, head), g.out.row};
    row_dots(gob, Rows{out + g.out.offset(group, head), g.out.row}, dot.data(), g.t_q, g.d_v);
    head_backward(be, g, Rows{q + g.q.offset(group, head), g.q.row},
                  Rows{k + g.k.offset(group, head), g.k.row},
                  Rows{v + g.v.offset(group, head), g.v.row}, gob, lse + b * g.t_q, dot.data(), gqb,
                  gkb, gvb, p.data(), dp.data());
  }
}

}  // namespace tensorplay::cpu_kernels
