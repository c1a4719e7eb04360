// The host kernel table: products through oneDNN (cpu/onednn_products.cpp), elementwise and
// reduction loops in plain C++.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "tensorplay/core/backend.h"
#include "tensorplay/core/storage.h"
#include "tensorplay/cpu_kernels/flash_attention.h"
#include "tensorplay/cpu_kernels/llama_kernels.h"
#include "tensorplay/cpu_kernels/nn_kernels.h"
#include "tensorplay/cpu_kernels/onednn_products.h"
#include "tensorplay/cpu_kernels/row_kernels.h"
#include "tensorplay/cpu_kernels/vector_kernels.h"

namespace tensorplay {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;

// tanh as a clamped rational function (Eigen's generic_fast_tanh_float, a few ulp from
// std::tanh). Branch-free, so the GELU loops vectorise; std::tanh (expm1f) is a scalar call that
// cost a fifth of a GPT training step.
inline float fast_tanh(float x) {
  constexpr float kClamp = 7.90531110763549805f;
  x = x < -kClamp ? -kClamp : (x > kClamp ? kClamp : x);
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * x;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return p / q;
}

// Walks out[i] = a[ia] op b[ib] over `shape` as contiguous rows: `row(a, a_step, b, b_step, out,
// n)` computes n outputs from operands that advance by their step (0 or 1) per element.
/// An odometer over all but the last dimension of `shape` (`n` elements): calls
/// visit(a_offset, b_offset, out_offset) for each innermost row, in order.
template <typename V>
void for_each_row(const int64_t* as, const int64_t* bs, const int64_t* shape, int rank, int64_t n,
                  V visit) {
  const int64_t inner = rank > 0 ? shape[rank - 1] : 1;
  int64_t index[8] = {0};
  int64_t aoff = 0, boff = 0;
  for (int64_t o = 0; o < n; o += inner) {
    visit(aoff, boff, o);
    for (int d = rank - 2; d >= 0; --d) {
      if (++index[d] < shape[d]) {
        aoff += as[d];
        boff += bs[d];
        break;
      }
      aoff -= as[d] * (shape[d] - 1);
      boff -= bs[d] * (shape[d] - 1);
      index[d] = 0;
    }
  }
}

template <typename Row>
bool binary_rows(const Row& row, const float* a, const int64_t* as, const float* b,
                 const int64_t* bs, float* out, const int64_t* shape, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  if (n == 0) return true;
  // Fast paths: both contiguous, or one operand a scalar.
  bool a_contig = true, b_contig = true, b_scalar = true, a_scalar = true;
  int64_t expect = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (shape[d] != 1) {
      a_contig = a_contig && as[d] == expect;
      b_contig = b_contig && bs[d] == expect;
      b_scalar = b_scalar && bs[d] == 0;
      a_scalar = a_scalar && as[d] == 0;
    }
    expect *= shape[d];
  }
  if (a_contig && (b_contig || b_scalar)) {
    row(a, 1, b, b_contig ? 1 : 0, out, n);
    return true;
  }
  if (a_scalar && b_contig) {
    row(a, 0, b, 1, out, n);
    return true;
  }
  // An odometer over all but the last dimension; rows whose steps are 0 or 1 go to `row`.
  int64_t inner = rank > 0 ? shape[rank - 1] : 1;
  int64_t ais = rank > 0 ? as[rank - 1] : 0, bis = rank > 0 ? bs[rank - 1] : 0;
  if ((ais != 0 && ais != 1) || (bis != 0 && bis != 1)) return false;
  for_each_row(as, bs, shape, rank, n, [&](int64_t aoff, int64_t boff, int64_t o) {
    row(a + aoff, static_cast<int>(ais), b + boff, static_cast<int>(bis), out + o, inner);
  });
  return true;
}

template <typename F>
void binary_loop(F f, const float* a, const int64_t* as, const float* b, const int64_t* bs,
                 float* out, const int64_t* shape, int rank) {
  auto row = [&f](const float* ar, int a_step, const float* br, int b_step, float* orow,
                  int64_t n) {
    for (int64_t i = 0; i < n; ++i) orow[i] = f(ar[i * a_step], br[i * b_step]);
  };
  if (binary_rows(row, a, as, b, bs, out, shape, rank)) return;
  // Rows with other strides: an odometer over every element.
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  int64_t inner = shape[rank - 1], ais = as[rank - 1], bis = bs[rank - 1];
  for_each_row(as, bs, shape, rank, n, [&](int64_t aoff, int64_t boff, int64_t o) {
    for (int64_t i = 0; i < inner; ++i) out[o + i] = f(a[aoff + i * ais], b[boff + i * bis]);
  });
}

class CpuBackend final : public Backend {
  static constexpr int64_t kSiluBlock = 512;

 public:
  const char* name() const override { return "cpu"; }

  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t bytes) const override {
    if (!dst_device.is_cpu() || !src_device.is_cpu())
      throw std::runtime_error("cpu backend cannot copy device memory: this build has no CUDA");
    if (bytes) std::memmove(dst, src, bytes);
  }

  void fill(float* dst, int64_t n, float value) const override {
    for (int64_t i = 0; i < n; ++i) dst[i] = value;
  }

  void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype,
               int64_t n) const override {
    if (src_dtype == dst_dtype) {
      // A zero-element tensor's data may be null: memmove with a null pointer is undefined even
      // for 0 bytes.
      if (n > 0) std::memmove(dst, src, static_cast<size_t>(n) * element_size(src_dtype));
    } else if (src_dtype == DType::Float32) {
      auto* s = static_cast<const float*>(src);
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = float_to_bfloat16(s[i]);
    } else {
      auto* s = static_cast<const uint16_t*>(src);
      auto* d = static_cast<float*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = bfloat16_to_float(s[i]);
    }
  }

  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
            int64_t ldc) const override {
    if (m == 0 || n == 0) return;
    if (k == 0) {
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? 0.0f : beta * c[i * ldc + j];
      return;
    }
    cpu_kernels::gemm_f32(trans_a, trans_b, 1, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc,
                          0);
  }

  void gemm_batched(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                    float alpha, const float* a, int64_t lda, int64_t stride_a, const float* b,
                    int64_t ldb, int64_t stride_b, float beta, float* c, int64_t ldc,
                    int64_t stride_c) const override {
    if (batch == 0) return;  // oneDNN makes no primitive for an empty batch
    if (batch == 1 || k == 0 || m == 0 || n == 0) {
      for (int64_t i = 0; i < batch; ++i) {
        gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
             c + i * stride_c, ldc);
      }
      return;
    }
    cpu_kernels::gemm_f32(trans_a, trans_b, batch, m, n, k, alpha, a, lda, stride_a, b, ldb,
                          stride_b, beta, c, ldc, stride_c);
  }

  bool linear_bias(int64_t rows, int64_t out, int64_t in, const float* x, const float* w,
                   const float* bias, float* y) const override {
    if (rows == 0 || out == 0 || in == 0) return false;
    cpu_kernels::linear_f32(rows, out, in, x, w, bias, y);
    return true;
  }

  // bfloat16 products: oneDNN's bfloat16 kernels where the machine has them (AVX-512), else the
  // operands widen exactly to float32 scratch and the float32 product accumulates. Either way each
  // result rounds once, which is what a GPU's bfloat16 gemm with float32 accumulation computes.
  void gemm_batched_bf16(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                         float alpha, const uint16_t* a, int64_t lda, int64_t stride_a,
                         const uint16_t* b, int64_t ldb, int64_t stride_b, float beta, uint16_t* c,
                         int64_t ldc, int64_t stride_c) const override {
    if (batch == 0 || m == 0 || n == 0) return;
    if (k > 0 && cpu_kernels::gemm_bf16(trans_a, trans_b, batch, m, n, k, alpha, a, lda, stride_a,
                                        b, ldb, stride_b, beta, c, ldc, stride_c))
      return;
    // Elements a strided batch of row-major matrices spans (rows x cols with leading dim ld).
    auto span = [batch](int64_t rows, int64_t cols, int64_t ld, int64_t stride) {
      if (rows == 0 || cols == 0) return int64_t{0};
      return (batch - 1) * stride + (rows - 1) * ld + cols;
    };
    const int64_t a_span = span(trans_a ? k : m, trans_a ? m : k, lda, stride_a);
    const int64_t b_span = span(trans_b ? n : k, trans_b ? k : n, ldb, stride_b);
    const int64_t c_span = span(m, n, ldc, stride_c);
    // Scratch from the host allocator (cached, bounded), released when the product is done.
    Storage sa(a_span * sizeof(float), cpu()), sb(b_span * sizeof(float), cpu());
    Storage sc(c_span * sizeof(float), cpu());
    auto widen = [](const uint16_t* src, const Storage& dst, int64_t count) {
      auto* d = static_cast<float*>(dst.data());
      for (int64_t i = 0; i < count; ++i) d[i] = bfloat16_to_float(src[i]);
    };
    widen(a, sa, a_span);
    widen(b, sb, b_span);
    auto* fc = static_cast<float*>(sc.data());
    if (beta != 0.0f) {
      widen(c, sc, c_span);
    } else {
      std::fill(fc, fc + c_span, 0.0f);
    }
    const auto* fa = static_cast<const float*>(sa.data());
    const auto* fb = static_cast<const float*>(sb.data());
    gemm_batched(trans_a, trans_b, batch, m, n, k, alpha, fa, lda, stride_a, fb, ldb, stride_b,
                 beta, fc, ldc, stride_c);
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t r = 0; r < m; ++r) {
        int64_t row = i * stride_c + r * ldc;
        for (int64_t j = 0; j < n; ++j) c[row + j] = float_to_bfloat16(fc[row + j]);
      }
  }

  void binary(BinaryOp op, const float* a, const int64_t* as, const float* b, const int64_t* bs,
              float* out, const int64_t* shape, int rank) const override {
    if (rank > 8) throw std::invalid_argument("elementwise ops support at most 8 dimensions");
    if (cpu_kernels::vec::active()) {
      auto row = [op](const float* ar, int a_step, const float* br, int b_step, float* orow,
                      int64_t n) {
        cpu_kernels::vec::binary_row(op, ar, a_step, br, b_step, orow, n);
      };
      if (binary_rows(row, a, as, b, bs, out, shape, rank)) return;
    }
    switch (op) {
      case BinaryOp::Add:
        return binary_loop([](float x, float y) { return x + y; }, a, as, b, bs, out, shape, rank);
      case BinaryOp::Sub:
        return binary_loop([](float x, float y) { return x - y; }, a, as, b, bs, out, shape, rank);
      case BinaryOp::Mul:
        return binary_loop([](float x, float y) { return x * y; }, a, as, b, bs, out, shape, rank);
      case BinaryOp::Div:
        return binary_loop([](float x, float y) { return x / y; }, a, as, b, bs, out, shape, rank);
    }
  }

  void affine(const float* x, float* out, int64_t n, float alpha, float beta) const override {
    if (cpu_kernels::vec::active()) return cpu_kernels::vec::affine(x, out, n, alpha, beta);
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * alpha + beta;
  }

  void unary(UnaryOp op, const float* x, float* y, int64_t n) const override {
    if (cpu_kernels::vec::active()) return cpu_kernels::vec::unary(op, x, y, n);
    switch (op) {
      case UnaryOp::Relu:
        // `x <= 0` is false for NaN, so NaN passes through as in PyTorch.
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] <= 0.0f ? 0.0f : x[i];
        return;
      case UnaryOp::Gelu:
        for (int64_t i = 0; i < n; ++i) {
          float v = x[i];
          y[i] = 0.5f * v * (1.0f + fast_tanh(kSqrt2OverPi * (v + kGeluCoeff * v * v * v)));
        }
        return;
      case UnaryOp::Tanh:
        for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
        return;
      case UnaryOp::Exp:
        for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
        return;
      case UnaryOp::Log:
        for (int64_t i = 0; i < n; ++i) y[i] = std::log(x[i]);
        return;
      case UnaryOp::Neg:
        for (int64_t i = 0; i < n; ++i) y[i] = -x[i];
        return;
      case UnaryOp::Sqrt:
        for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]);
        return;
      case UnaryOp::Square:
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];
        return;
      case UnaryOp::Sigmoid:
        for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
        return;
    }
  }

  void unary_backward(UnaryOp op, const float* x, const float* y, const float* gy, float* gx,
                      int64_t n) const override {
    if (cpu_kernels::vec::active()) return cpu_kernels::vec::unary_backward(op, x, y, gy, gx, n);
    switch (op) {
      case UnaryOp::Relu:
        for (int64_t i = 0; i < n; ++i) gx[i] = x[i] <= 0.0f ? 0.0f : gy[i];  // PyTorch's rule
        return;
      case UnaryOp::Gelu:
        for (int64_t i = 0; i < n; ++i) {
          float v = x[i];
          float inner = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
          float t = fast_tanh(inner);
          float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * v * v);
          gx[i] = gy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner);
        }
        return;
      case UnaryOp::Tanh:
        for (int64_t i = 0; i < n; ++i) gx[i] = gy[i] * (1.0f - y[i] * y[i]);
        return;
      case UnaryOp::Exp:
        for (int64_t i = 0; i < n; ++i) gx[i] = gy[i] * y[i];
        return;
      case UnaryOp::Log:
        for (int64_t i = 0; i < n; ++i) gx[i] = gy[i] / x[i];
        return;
      case UnaryOp::Neg:
        for (int64_t i = 0; i < n; ++i) gx[i] = -gy[i];
        return;
      case UnaryOp::Sqrt:
        for (int64_t i = 0; i < n; ++i) gx[i] = gy[i] * 0.5f / y[i];
        return;
      case UnaryOp::Square:
        for (int64_t i = 0; i < n; ++i) gx[i] = gy[i] * 2.0f * x[i];
        return;
      case UnaryOp::Sigmoid:
        for (int64_t i = 0; i < n; ++i) gx[i] = gy[i] * y[i] * (1.0f - y[i]);
        return;
    }
  }

  void sum_dim(const float* x, float* out, int64_t outer, int64_t reduce,
               int64_t inner) const override {
    if (cpu_kernels::vec::active()) return cpu_kernels::vec::sum_dim(x, out, outer, reduce, inner);
    for (int64_t o = 0; o < outer; ++o) {
      float* dst = out + o * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] = 0.0f;
      for (int64_t r = 0; r < reduce; ++r) {
        const float* src = x + (o * reduce + r) * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] += src[i];
      }
    }
  }

  // -- neural-network kernels (cpu/nn_kernels.cpp) ----------------------------------------------

  void strided_copy(const float* x, const int64_t* x_strides, float* y, const int64_t* shape,
                    int rank) const override {
    if (rank > 8) throw std::invalid_argument("strided_copy supports at most 8 dimensions");
    cpu_kernels::strided_copy(x, x_strides, y, shape, rank);
  }
  void softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
               bool log) const override {
    if (inner == 1 && cpu_kernels::vec::active())
      return cpu_kernels::vec::softmax_rows(x, y, outer, n, log);
    cpu_kernels::softmax(x, y, outer, n, inner, log);
  }
  void softmax_backward(const float* y, const float* gy, float* gx, int64_t outer, int64_t n,
                        int64_t inner, bool log) const override {
    if (inner == 1 && cpu_kernels::vec::active())
      return cpu_kernels::vec::softmax_rows_backward(y, gy, gx, outer, n, log);
    cpu_kernels::softmax_backward(y, gy, gx, outer, n, inner, log);
  }
  void causal_softmax(const float* x, float* y, int64_t batch, int64_t t_q,
                      int64_t t_k) const override {
    if (cpu_kernels::vec::active()) return cpu_kernels::vec::causal_softmax(x, y, batch, t_q, t_k);
    cpu_kernels::causal_softmax(x, y, batch, t_q, t_k);
  }
  void layer_norm(const float* x, const float* weight, const float* bias, float* y, float* mean,
                  float* rstd, int64_t rows, int64_t cols, float eps) const override {
    if (cpu_kernels::vec::active())
      return cpu_kernels::vec::layer_norm(x, weight, bias, y, mean, rstd, rows, cols, eps);
    cpu_kernels::layer_norm(x, weight, bias, y, mean, rstd, rows, cols, eps);
  }
  void layer_norm_backward_input(const float* x, const float* weight, const float* mean,
                                 const float* rstd, const float* gy, float* gx, int64_t rows,
                                 int64_t cols) const override {
    if (cpu_kernels::vec::active())
      return cpu_kernels::vec::layer_norm_backward_input(x, weight, mean, rstd, gy, gx, rows, cols);
    cpu_kernels::layer_norm_backward_input(x, weight, mean, rstd, gy, gx, rows, cols);
  }
  void layer_norm_backward_params(const float* x, const float* mean, const float* rstd,
                                  const float* gy, float* gweight, float* gbias, int64_t rows,
                                  int64_t cols) const override {
    if (cpu_kernels::vec::active())
      return cpu_kernels::vec::layer_norm_backward_params(x, mean, rstd, gy, gweight, gbias, rows,
                                                          cols);
    cpu_kernels::layer_norm_backward_params(x, mean, rstd, gy, gweight, gbias, rows, cols);
  }
  void rms_norm(const float* x, const float* weight, float* y, float* rstd, int64_t rows,
                int64_t cols, float eps) const override {
    if (cpu_kernels::vec::active())
      return cpu_kernels::vec::rms_norm(x, weight, y, rstd, rows, cols, eps);
    cpu_kernels::rms_norm(x, weight, y, rstd, rows, cols, eps);
  }
  void rms_norm_backward_input(const float* x, const float* weight, const float* rstd,
                               const float* gy, float* gx, int64_t rows,
                               int64_t cols) const override {
    if (cpu_kernels::vec::active())
      return cpu_kernels::vec::rms_norm_backward_input(x, weight, rstd, gy, gx, rows, cols);
    cpu_kernels::rms_norm_backward_input(x, weight, rstd, gy, gx, rows, cols);
  }
  void rms_norm_backward_params(const float* x, const float* rstd, const float* gy, float* gweight,
                                int64_t rows, int64_t cols) const override {
    cpu_kernels::rms_norm_backward_params(x, rstd, gy, gweight, rows, cols);
  }
  // The vector kernels compute the sigmoid inline; the scalar target computes it into a block on
  // the stack, then one fused sweep.
  void silu_mul(const float* gate, const float* up, float* y, int64_t n) const override {
    if (cpu_kernels::vec::active()) return cpu_kernels::vec::silu_mul(gate, up, y, n);
    float sig[kSiluBlock];
    for (int64_t i = 0; i < n; i += kSiluBlock) {
      const int64_t len = std::min(kSiluBlock, n - i);
      unary(UnaryOp::Sigmoid, gate + i, sig, len);
      cpu_kernels::silu_mul(gate + i, sig, up + i, y + i, len);
    }
  }
  void silu_mul_backward(const float* gate, const float* up, const float* gy, float* ggate,
                         float* gup, int64_t n) const override {
    if (cpu_kernels::vec::active())
      return cpu_kernels::vec::silu_mul_backward(gate, up, gy, ggate, gup, n);
    float sig[kSiluBlock];
    for (int64_t i = 0; i < n; i += kSiluBlock) {
      const int64_t len = std::min(kSiluBlock, n - i);
      unary(UnaryOp::Sigmoid, gate + i, sig, len);
      cpu_kernels::silu_mul_backward(gate + i, sig, up + i, gy + i,
                                     ggate != nullptr ? ggate + i : nullptr,
                                     gup != nullptr ? gup + i : nullptr, len);
    }
  }
  void rotary(const float* x, const float* cos, const float* sin, float* y, int64_t outer,
              int64_t time, int64_t inner, int64_t dim, bool transpose) const override {
    cpu_kernels::rotary(x, cos, sin, y, outer, time, inner, dim, transpose);
  }
  void embedding(const float* ids, const float* weight, float* out, int64_t n,
                 int64_t dim) const override {
    cpu_kernels::embedding(ids, weight, out, n, dim);
  }
  void embedding_backward(const float* ids, const float* gy, float* gweight, int64_t n, int64_t dim,
                          int64_t vocab) const override {
    if (cpu_kernels::vec::active())
      return cpu_kernels::vec::embedding_backward(ids, gy, gweight, n, dim, vocab);
    cpu_kernels::embedding_backward(ids, gy, gweight, n, dim, vocab);
  }
  void flash_attention(const AttentionGeometry& g, const float* q, const float* k, const float* v,
                       float* out, float* lse) const override {
    cpu_kernels::flash_attention(*this, g, q, k, v, out, lse);
  }
  void flash_attention_backward(const AttentionGeometry& g, const float* q, const float* k,
                                const float* v, const float* out, const float* lse,
                                const float* gout, float* gq, float* gk, float* gv) const override {
    cpu_kernels::flash_attention_backward(*this, g, q, k, v, out, lse, gout, gq, gk, gv);
  }
  void nll_rows(const float* logp, const float* targets, float* loss, int64_t rows, int64_t classes,
                int64_t ignore_index) const override {
    cpu_kernels::nll_rows(logp, targets, loss, rows, classes, ignore_index);
  }
  void cross_entropy_backward(const float* logp, const float* targets, const float* grad_rows,
                              float* gx, int64_t rows, int64_t classes,
                              int64_t ignore_index) const override {
    if (cpu_kernels::vec::active())
      return cpu_kernels::vec::cross_entropy_backward(logp, targets, grad_rows, gx, rows, classes,
                                                      ignore_index);
    cpu_kernels::cross_entropy_backward(logp, targets, grad_rows, gx, rows, classes, ignore_index);
  }
};

}  // namespace

const Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace tensorplay
