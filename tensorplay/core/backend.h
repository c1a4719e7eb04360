// The kernel table: every numeric kernel the ops call, as virtual functions over raw pointers, with
// one implementation per device type (cpu/cpu_backend.cpp, cuda/cuda_backend.cu). Ops pick the
// table by the device of their operands; a kernel missing on a device raises a clear error.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "tensorplay/core/device.h"
#include "tensorplay/core/dtype.h"

namespace tensorplay {

/// Elementwise binary operations (with broadcasting).
enum class BinaryOp : uint8_t { Add, Sub, Mul, Div };

/// Elementwise unary operations with their derivative kernels.
enum class UnaryOp : uint8_t { Relu, Gelu, Tanh, Exp, Log, Neg, Sqrt, Square, Sigmoid };

/// Whether the derivative of `op` is computed from its output y (else from its input x; Neg
/// reads neither). unary_backward reads only that operand and takes null for the other.
constexpr bool unary_grad_reads_output(UnaryOp op) {
  return op == UnaryOp::Tanh || op == UnaryOp::Exp || op == UnaryOp::Sqrt || op == UnaryOp::Sigmoid;
}

/// Where the heads of one attention operand lie: head h of group g (a batch element) starts at
/// g * group + h * head elements, and its rows (positions) are `row` apart. Contiguous
/// [B, H, T, D] is one group of B * H heads with head = T * D and row = D; a fused projection's
/// [B, T, 3, H, D] gives q groups of H heads with group = 3 T H D, head = D, row = 3 H D.
struct HeadStrides {
  int64_t group = 0, head = 0, row = 0;
  int64_t offset(int64_t g, int64_t h) const { return g * group + h * head; }
};

/// An attention's dimensions and operand layouts: `groups` x `heads` heads of t_q queries against
/// t_k keys, q and k rows of d, v and out rows of d_v, scaled by `scale`, causal or not.
struct AttentionGeometry {
  int64_t groups = 1, heads = 1, t_q = 0, t_k = 0, d = 0, d_v = 0;
  float scale = 1.0f;
  bool causal = false;
  HeadStrides q, k, v, out;
  int64_t batch() const { return groups * heads; }
};

/// Kernels for one device type. Pointers are to memory of that device; float32 unless stated.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // -- memory ------------------------------------------------------------------------------------

  /// Copies bytes between two devices (either may be this backend's or the host).
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t bytes) const = 0;
  virtual void fill(float* dst, int64_t n, float value) const = 0;
  /// Converts n elements between dtypes (float32 <-> bfloat16, or a plain copy).
  virtual void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                       int64_t n) const = 0;
  /// Blocks until queued work on this device is done (no-op on the host).
  virtual void synchronize() const {}

  // -- products ----------------------------------------------------------------------------------

  /// Row-major C[m,n] = alpha * op(A) op(B) + beta * C, op = transpose when trans_* is set.
  virtual void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) const = 0;
  /// `batch` gemms with fixed strides between consecutive matrices (0 broadcasts one operand).
  virtual void gemm_batched(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n,
                            int64_t k, float alpha, const float* a, int64_t lda, int64_t stride_a,
                            const float* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                            int64_t ldc, int64_t stride_c) const = 0;

  /// A linear layer's forward with its bias, y[rows, out] = x[rows, in] w[out, in]^T + bias[out],
  /// in one kernel. Returns false (computing nothing) where the device has none; the caller then
  /// adds the bias itself.
  virtual bool linear_bias(int64_t /*rows*/, int64_t /*out*/, int64_t /*in*/, const float* /*x*/,
                           const float* /*w*/, const float* /*bias*/, float* /*y*/) const {
    return false;
  }

  // -- elementwise -------------------------------------------------------------------------------

  /// out[i] = a[ia] op b[ib] over `shape` (rank <= 8) with element strides (0 = broadcast).
  virtual void binary(BinaryOp op, const float* a, const int64_t* a_strides, const float* b,
                      const int64_t* b_strides, float* out, const int64_t* shape,
                      int rank) const = 0;
  /// out = x * alpha + beta (elementwise affine with scalars).
  virtual void affine(const float* x, float* out, int64_t n, float alpha, float beta) const = 0;
  /// y = f(x).
  virtual void unary(UnaryOp op, const float* x, float* y, int64_t n) const = 0;
  /// gx = gy * f'(x), reading y = f(x) instead of x where unary_grad_reads_output(op); the
  /// operand not read may be null.
  virtual void unary_backward(UnaryOp op, const float* x, const float* y, const float* gy,
                              float* gx, int64_t n) const = 0;

  // -- reductions --------------------------------------------------------------------------------

  /// x viewed as [outer, reduce, inner]; out[outer, inner] = sum over the middle dimension.
  virtual void sum_dim(const float* x, float* out, int64_t outer, int64_t reduce,
                       int64_t inner) const = 0;

  // Kernels below have a default that throws, so a device table may add them one at a time.

  // -- bfloat16 products --------------------------------------------------------------------------

  /// gemm_batched on bfloat16 operands and result (uint16_t bit patterns), accumulating in
  /// float32 and rounding once per result element. With k = 0, beta must be 0 or 1.
  virtual void gemm_batched_bf16(bool /*trans_a*/, bool /*trans_b*/, int64_t /*batch*/,
                                 int64_t /*m*/, int64_t /*n*/, int64_t /*k*/, float /*alpha*/,
                                 const uint16_t* /*a*/, int64_t /*lda*/, int64_t /*stride_a*/,
                                 const uint16_t* /*b*/, int64_t /*ldb*/, int64_t /*stride_b*/,
                                 float /*beta*/, uint16_t* /*c*/, int64_t /*ldc*/,
                                 int64_t /*stride_c*/) const {
    missing("gemm_batched_bf16");
  }

  // -- layout ------------------------------------------------------------------------------------

  /// y (contiguous, `shape`, rank <= 8) takes x at element strides `x_strides` (permute,
  /// transpose).
  virtual void strided_copy(const float* /*x*/, const int64_t* /*x_strides*/, float* /*y*/,
                            const int64_t* /*shape*/, int /*rank*/) const {
    missing("strided_copy");
  }

  // -- softmax -----------------------------------------------------------------------------------

  /// x viewed as [outer, n, inner]: y = softmax (log_softmax when `log`) along the middle dim.
  virtual void softmax(const float* /*x*/, float* /*y*/, int64_t /*outer*/, int64_t /*n*/,
                       int64_t /*inner*/, bool /*log*/) const {
    missing("softmax");
  }
  /// Gradient of softmax (log_softmax when `log`) from its output y and output gradient gy.
  virtual void softmax_backward(const float* /*y*/, const float* /*gy*/, float* /*gx*/,
                                int64_t /*outer*/, int64_t /*n*/, int64_t /*inner*/,
                                bool /*log*/) const {
    missing("softmax_backward");
  }
  /// Softmax over the rows of `batch` matrices [t_q, t_k], row i seeing only columns j <= i (the
  /// causal mask, top-left aligned as in PyTorch); masked entries of y are 0. Its backward is
  /// softmax_backward with inner = 1.
  virtual void causal_softmax(const float* /*x*/, float* /*y*/, int64_t /*batch*/, int64_t /*t_q*/,
                              int64_t /*t_k*/) const {
    missing("causal_softmax");
  }

  // -- layer norm --------------------------------------------------------------------------------

  /// Normalises each of `rows` rows of `cols` values; weight and bias ([cols]) may be null.
  /// Writes y and the per-row mean and 1/sqrt(var + eps) that the backward reads.
  virtual void layer_norm(const float* /*x*/, const float* /*weight*/, const float* /*bias*/,
                          float* /*y*/, float* /*mean*/, float* /*rstd*/, int64_t /*rows*/,
                          int64_t /*cols*/, float /*eps*/) const {
    missing("layer_norm");
  }
  /// gx from gy (weight may be null).
  virtual void layer_norm_backward_input(const float* /*x*/, const float* /*weight*/,
                                         const float* /*mean*/, const float* /*rstd*/,
                                         const float* /*gy*/, float* /*gx*/, int64_t /*rows*/,
                                         int64_t /*cols*/) const {
    missing("layer_norm_backward_input");
  }
  /// gweight[j] = sum_r gy * xhat, gbias[j] = sum_r gy; either output may be null (not computed).
  virtual void layer_norm_backward_params(const float* /*x*/, const float* /*mean*/,
                                          const float* /*rstd*/, const float* /*gy*/,
                                          float* /*gweight*/, float* /*gbias*/, int64_t /*rows*/,
                                          int64_t /*cols*/) const {
    missing("layer_norm_backward_params");
  }

  // -- Llama parts: RMS norm, SiLU-gated product, rotary positions --------------------------------

  /// y = x * rstd * weight per row of `cols` values, rstd = 1/sqrt(mean(x^2) + eps) (written for
  /// the backward); weight ([cols]) may be null.
  virtual void rms_norm(const float* /*x*/, const float* /*weight*/, float* /*y*/, float* /*rstd*/,
                        int64_t /*rows*/, int64_t /*cols*/, float /*eps*/) const {
    missing("rms_norm");
  }
  /// gx from gy (weight may be null).
  virtual void rms_norm_backward_input(const float* /*x*/, const float* /*weight*/,
                                       const float* /*rstd*/, const float* /*gy*/, float* /*gx*/,
                                       int64_t /*rows*/, int64_t /*cols*/) const {
    missing("rms_norm_backward_input");
  }
  /// gweight[j] = sum over rows of gy * x * rstd (overwritten).
  virtual void rms_norm_backward_params(const float* /*x*/, const float* /*rstd*/,
                                        const float* /*gy*/, float* /*gweight*/, int64_t /*rows*/,
                                        int64_t /*cols*/) const {
    missing("rms_norm_backward_params");
  }
  /// y = silu(gate) * up = gate * sigmoid(gate) * up over n elements (SwiGLU's product).
  virtual void silu_mul(const float* /*gate*/, const float* /*up*/, float* /*y*/,
                        int64_t /*n*/) const {
    missing("silu_mul");
  }
  /// ggate = gy * up * silu'(gate), gup = gy * silu(gate); either output may be null.
  virtual void silu_mul_backward(const float* /*gate*/, const float* /*up*/, const float* /*gy*/,
                                 float* /*ggate*/, float* /*gup*/, int64_t /*n*/) const {
    missing("silu_mul_backward");
  }
  /// x [outer, time, dim] (dim even, h = dim / 2) with tables cos, sin [time, dim]:
  /// y[c] = x[c] cos[c] - x[c+h] sin[c], y[c+h] = x[c+h] cos[c+h] + x[c] sin[c+h] for c < h
  /// (x * cos + rotate_half(x) * sin). With `transpose`, the adjoint map (the input gradient
  /// from the output gradient): y[c] = x[c] cos[c] + x[c+h] sin[c+h],
  /// y[c+h] = x[c+h] cos[c+h] - x[c] sin[c]. Rows of `dim` lie [outer, time, inner]: row
  /// (o, t, i) turns by position t ([B, H, T, D]: inner 1; [B, T, H, D]: inner H).
  virtual void rotary(const float* /*x*/, const float* /*cos*/, const float* /*sin*/, float* /*y*/,
                      int64_t /*outer*/, int64_t /*time*/, int64_t /*inner*/, int64_t /*dim*/,
                      bool /*transpose*/) const {
    missing("rotary");
  }

  // -- embedding ---------------------------------------------------------------------------------

  /// out[i, :] = weight[ids[i], :] for n ids (float values holding checked integer ids).
  virtual void embedding(const float* /*ids*/, const float* /*weight*/, float* /*out*/,
                         int64_t /*n*/, int64_t /*dim*/) const {
    missing("embedding");
  }
  /// gweight[vocab, dim] = sum over i with ids[i] = v of gy[i, :] (gweight is overwritten).
  virtual void embedding_backward(const float* /*ids*/, const float* /*gy*/, float* /*gweight*/,
                                  int64_t /*n*/, int64_t /*dim*/, int64_t /*vocab*/) const {
    missing("embedding_backward");
  }

  // -- fused attention ---------------------------------------------------------------------------

  /// out = softmax(scale q k^T (+ causal mask, as causal_softmax)) v for every head `g` lays out
  /// (q [t_q, d], k [t_k, d], v [t_k, d_v] per head), without materialising the [t_q, t_k]
  /// probabilities; lse [g.groups * g.heads, t_q] receives each row's log-sum-exp for the backward.
  virtual void flash_attention(const AttentionGeometry& /*g*/, const float* /*q*/,
                               const float* /*k*/, const float* /*v*/, float* /*out*/,
                               float* /*lse*/) const {
    missing("flash_attention");
  }
  /// Gradients of flash_attention from the output gradient gout (laid out as out); gq, gk, gv
  /// (laid out as q, k, v) may be null: not computed.
  virtual void flash_attention_backward(const AttentionGeometry& /*g*/, const float* /*q*/,
                                        const float* /*k*/, const float* /*v*/,
                                        const float* /*out*/, const float* /*lse*/,
                                        const float* /*gout*/, float* /*gq*/, float* /*gk*/,
                                        float* /*gv*/) const {
    missing("flash_attention_backward");
  }

  // -- cross entropy -----------------------------------------------------------------------------

  /// loss[r] = -logp[r, targets[r]], or 0 where targets[r] == ignore_index.
  virtual void nll_rows(const float* /*logp*/, const float* /*targets*/, float* /*loss*/,
                        int64_t /*rows*/, int64_t /*classes*/, int64_t /*ignore_index*/) const {
    missing("nll_rows");
  }
  /// gx[r, c] = grad_rows[r] * (exp(logp[r, c]) - [c == targets[r]]), 0 on ignored rows. gx may
  /// be logp (in place).
  virtual void cross_entropy_backward(const float* /*logp*/, const float* /*targets*/,
                                      const float* /*grad_rows*/, float* /*gx*/, int64_t /*rows*/,
                                      int64_t /*classes*/, int64_t /*ignore_index*/) const {
    missing("cross_entropy_backward");
  }

 protected:
  [[noreturn]] void missing(const char* kernel) const {
    throw std::runtime_error(std::string(name()) + ": kernel " + kernel +
                             " is not implemented on this device");
  }
};

/// The kernel table for a device; throws when that device type is not built in.
const Backend& backend_for(Device device);

/// Installs the table for a device type (the CUDA backend registers itself when built).
void register_backend(DeviceType type, const Backend* backend);

}  // namespace tensorplay
