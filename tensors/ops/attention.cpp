// Attention through batched gemms and a (causal) row softmax. The backward needs the attention
// probabilities P: dV = P^T dO, dS = softmax'(P, dO V^T), dQ = dS K / sqrt(D), dK = dS^T Q /
// sqrt(D). P is kept when it is smaller than q, k and v together, and recomputed from them (the
// same kernels on the same inputs, so the same bits) when it is larger: for long sequences P
// would dominate the memory a stage holds per microbatch. Each input's gradient is computed the
// same way whichever are requested. On the host, long contexts take the fused kernel instead
// (cpu/flash_attention.cpp): tiles with an online softmax, keeping only a log-sum-exp per row.
#include "tensors/ops/attention.h"

#include <cmath>
#include <optional>
#include <stdexcept>

#include "tensors/autograd/node.h"
#include "tensors/ops/detail/op_support.h"
#include "tensors/ops/shape_ops.h"
#include "tensors/trace_hook.h"

namespace tensorplay {
namespace {

// Where one operand's matrices lie: the batch is `groups` runs of `per_group` matrices (dims
// below); group g starts `group` elements after group g - 1, a group's matrices are `matrix`
// apart, and a matrix's rows `ld` apart. `offset`: where the first matrix starts in its tensor.
struct MatrixLayout {
  int64_t group = 0, matrix = 0, ld = 0, offset = 0;
};

// A row-major [batch, rows, cols] tensor as one group.
MatrixLayout contiguous_layout(int64_t batch, int64_t rows, int64_t cols) {
  return {batch * rows * cols, rows * cols, cols, 0};
}

struct AttentionDims {
  int64_t batch = 1, t_q = 0, t_k = 0, d = 0, d_v = 0;
  float scale = 1.0f;
  // The batch as groups of matrices (one group unless the op reads q, k and v interleaved), and
  // where q, k, v and the output (and so their gradients) lie.
  int64_t groups = 1, per_group = 1;
  MatrixLayout q, k, v, out;
  // A [batch, rows, cols] matrix of the probabilities' kind: contiguous, in the same groups.
  MatrixLayout square() const { return {per_group * t_q * t_k, t_q * t_k, t_k, 0}; }
};

// The layouts of contiguous q [.., t_q, d], k [.., t_k, d], v [.., t_k, d_v] and output.
void set_contiguous_layouts(AttentionDims& s) {
  s.groups = 1;
  s.per_group = s.batch;
  s.q = contiguous_layout(s.batch, s.t_q, s.d);
  s.k = contiguous_layout(s.batch, s.t_k, s.d);
  s.v = contiguous_layout(s.batch, s.t_k, s.d_v);
  s.out = contiguous_layout(s.batch, s.t_q, s.d_v);
}

// C = alpha op(A) op(B) + beta C over every matrix of the batch: one batched product per group
// (one in all for contiguous operands).
void gemm_groups(const Backend& be, const AttentionDims& s, bool trans_a, bool trans_b, int64_t m,
                 int64_t n, int64_t k, float alpha, const float* a, const MatrixLayout& la,
                 const float* b, const MatrixLayout& lb, float beta, float* c,
                 const MatrixLayout& lc) {
  for (int64_t g = 0; g < s.groups; ++g)
    be.gemm_batched(trans_a, trans_b, s.per_group, m, n, k, alpha, a + la.offset + g * la.group,
                    la.ld, la.matrix, b + lb.offset + g * lb.group, lb.ld, lb.matrix, beta,
                    c + lc.offset + g * lc.group, lc.ld, lc.matrix);
}

// P = softmax(scale q k^T) (causal: row i sees keys j <= i), [batch, t_q, t_k].
Tensor attention_probs(const Tensor& q, const Tensor& k, const AttentionDims& s, bool causal) {
  const Backend& be = detail::backend_of(q);
  Tensor probs = empty({s.batch, s.t_q, s.t_k}, {.device = q.device()});
  gemm_groups(be, s, false, true, s.t_q, s.t_k, s.d, s.scale, q.data<float>(), s.q, k.data<float>(),
              s.k, 0.0f, probs.data<float>(), s.square());
  if (causal)
    be.causal_softmax(probs.data<float>(), probs.data<float>(), s.batch, s.t_q, s.t_k);
  else
    be.softmax(probs.data<float>(), probs.data<float>(), s.batch * s.t_q, s.t_k, 1, false);
  return probs;
}

// Whether the backward recomputes P rather than keeping it: P is larger than q, k and v.
bool recompute_probs(const AttentionDims& s) {
  return s.t_q * s.t_k > s.t_q * s.d + s.t_k * (s.d + s.d_v);
}

// Where the backward of attention writes dq, dk and dv: three tensors of q's, k's and v's shapes,
// or (packed: the op took one tensor holding q, k and v) one gradient of that tensor's shape,
// whose parts lie as q, k and v lie in it, so that no zero-padded slice gradients are summed.
struct AttentionGrads {
  std::vector<Tensor> parts;  // dq, dk, dv (undefined: not requested yet)
  Tensor packed;              // defined for a packed op: what the node returns

  AttentionGrads(const Tensor& q, const std::optional<Shape>& packed_shape) : parts(3) {
    if (packed_shape) packed = empty(*packed_shape, {.device = q.device()});
  }
  // The data of part `i` (its layout's offset not applied), allocated with `like`'s shape when
  // the gradient is not packed.
  float* part(int i, const Tensor& like) {
    if (packed.defined()) return packed.data<float>();
    if (!parts[i].defined()) parts[i] = empty(like.shape(), {.device = like.device()});
    return parts[i].data<float>();
  }
  std::vector<Tensor> result() { return packed.defined() ? std::vector<Tensor>{packed} : parts; }
};

// The requested flags of a node's three gradients: a packed node computes all three.
std::vector<bool> wanted(const std::vector<bool>& needed, bool packed) {
  return packed ? std::vector<bool>{needed[0], needed[0], needed[0]} : needed;
}

struct AttentionBackward : autograd::Node {
  Tensor q, k, v, probs;  // probs undefined when recomputed
  AttentionDims s;
  bool causal = false;
  std::optional<Shape> packed_shape;  // set when the op took one packed [3, ...] tensor
  const char* name() const override { return "ScaledDotProductAttentionBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>& flags) override {
    const std::vector<bool> needed = wanted(flags, packed_shape.has_value());
    AttentionGrads out(q, packed_shape);
    const Backend& be = detail::backend_of(g);
    Tensor kept_or_recomputed = probs.defined() ? probs : attention_probs(q, k, s, causal);
    const float* p = kept_or_recomputed.data<float>();
    if (needed[2]) {  // dV = P^T dO
      gemm_groups(be, s, true, false, s.t_k, s.d_v, s.t_q, 1.0f, p, s.square(), g.data<float>(),
                  s.out, 0.0f, out.part(2, v), s.v);
    }
    if (needed[0] || needed[1]) {
      // dS = softmax_backward(P, dO V^T), in one buffer.
      Tensor gs = empty({s.batch, s.t_q, s.t_k}, {.device = g.device()});
      gemm_groups(be, s, false, true, s.t_q, s.t_k, s.d_v, 1.0f, g.data<float>(), s.out,
                  v.data<float>(), s.v, 0.0f, gs.data<float>(), s.square());
      be.softmax_backward(p, gs.data<float>(), gs.data<float>(), s.batch * s.t_q, s.t_k, 1, false);
      if (needed[0]) {  // dQ = scale * dS K
        gemm_groups(be, s, false, false, s.t_q, s.d, s.t_k, s.scale, gs.data<float>(), s.square(),
                    k.data<float>(), s.k, 0.0f, out.part(0, q), s.q);
      }
      if (needed[1]) {  // dK = scale * dS^T Q
        gemm_groups(be, s, true, false, s.t_k, s.d, s.t_q, s.scale, gs.data<float>(), s.square(),
                    q.data<float>(), s.q, 0.0f, out.part(1, k), s.k);
      }
    }
    return out.result();
  }
  void release() override {
    q = Tensor();
    k = Tensor();
    v = Tensor();
    probs = Tensor();
  }
  std::vector<Tensor*> saved_tensors() override { return {&q, &k, &v}; }
};

struct FlashAttentionBackward : autograd::Node {
  Tensor q, k, v, out, lse;
  AttentionDims s;  // contiguous layouts (the fused kernel reads no others)
  bool causal = false;
  std::optional<Shape> packed_shape;  // set when the op took one tensor holding q, k and v
  const char* name() const override { return "FlashAttentionBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>& flags) override {
    const std::vector<bool> needed = wanted(flags, packed_shape.has_value());
    AttentionGrads grads(q, packed_shape);
    const Tensor* like[3] = {&q, &k, &v};
    const MatrixLayout* layout[3] = {&s.q, &s.k, &s.v};
    float* parts[3] = {nullptr, nullptr, nullptr};
    for (int i = 0; i < 3; ++i)
      if (needed[i]) parts[i] = grads.part(i, *like[i]) + layout[i]->offset;
    detail::backend_of(g).flash_attention_backward(
        q.data<float>() + s.q.offset, k.data<float>() + s.k.offset, v.data<float>() + s.v.offset,
        out.data<float>(), lse.data<float>(), g.data<float>(), parts[0], parts[1], parts[2],
        s.batch, s.t_q, s.t_k, s.d, s.d_v, s.scale, causal);
    return grads.result();
  }
  void release() override {
    q = Tensor();
    k = Tensor();
    v = Tensor();
    out = Tensor();
    lse = Tensor();
  }
  std::vector<Tensor*> saved_tensors() override { return {&q, &k, &v, &out, &lse}; }
};

AttentionDims check_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  const char* op = "scaled_dot_product_attention";
  detail::check_defined(op, q, "q");
  detail::check_defined(op, k, "k");
  detail::check_defined(op, v, "v");
  detail::check_same_device(op, q, k);
  detail::check_same_device(op, q, v);
  auto shapes = [&] {
    return "q " + to_string(q.shape()) + ", k " + to_string(k.shape()) + ", v " +
           to_string(v.shape());
  };
  if (q.dim() < 2 || k.dim() != q.dim() || v.dim() != q.dim())
    throw std::invalid_argument(
        std::string(op) + ": q, k, v must have the same rank >= 2 ([B, H, T, D]); got " + shapes());
  int64_t r = q.dim();
  for (int64_t d = 0; d < r - 2; ++d)
    if (q.shape()[d] != k.shape()[d] || q.shape()[d] != v.shape()[d])
      throw std::invalid_argument(std::string(op) + ": batch dimensions differ: " + shapes());
  AttentionDims s;
  s.batch = numel_range(q.shape(), 0, r - 2);
  s.t_q = q.shape()[r - 2];
  s.d = q.shape()[r - 1];
  s.t_k = k.shape()[r - 2];
  s.d_v = v.shape()[r - 1];
  if (k.shape()[r - 1] != s.d)
    throw std::invalid_argument(std::string(op) + ": q and k head sizes differ: " + shapes());
  if (v.shape()[r - 2] != s.t_k)
    throw std::invalid_argument(std::string(op) + ": k and v sequence lengths differ: " + shapes());
  if (s.d == 0 || s.t_k == 0)
    throw std::invalid_argument(std::string(op) + ": empty head size or key sequence: " + shapes());
  s.scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  return s;
}

}  // namespace

namespace {

// A node's inputs, the output's shape and, for a packed op, the shape of its one input.
struct AttentionInputs {
  std::vector<Tensor> edges;  // q, k, v; or the packed tensor
  Shape out_shape;
  std::optional<Shape> packed_shape;  // set for a packed op
};

template <typename NodeType>
Tensor attach_attention(Tensor out, std::shared_ptr<NodeType> node, const Tensor& q,
                        const Tensor& k, const Tensor& v, const AttentionInputs& in) {
  node->q = q.detach();
  node->k = k.detach();
  node->v = v.detach();
  node->packed_shape = in.packed_shape;
  return autograd::attach(out, node, in.edges);
}

// The fused kernel, for contiguous layouts (at offsets).
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionDims& s,
                       bool causal, const AttentionInputs& in) {
  Tensor out = empty(in.out_shape, {.device = q.device()});
  Tensor lse = empty({s.batch, s.t_q}, {.device = q.device()});
  detail::backend_of(q).flash_attention(
      q.data<float>() + s.q.offset, k.data<float>() + s.k.offset, v.data<float>() + s.v.offset,
      out.data<float>(), lse.data<float>(), s.batch, s.t_q, s.t_k, s.d, s.d_v, s.scale, causal);
  if (!autograd::any_needs_grad(in.edges)) return out;
  auto node = std::make_shared<FlashAttentionBackward>();
  node->out = out.detach();
  node->lse = lse;
  node->s = s;
  node->causal = causal;
  return attach_attention(out, node, q, k, v, in);
}

Tensor plain_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionDims& s,
                       bool causal, const AttentionInputs& in) {
  const Backend& be = detail::backend_of(q);
  Tensor probs = attention_probs(q, k, s, causal);
  Tensor out = empty(in.out_shape, {.device = q.device()});
  gemm_groups(be, s, false, false, s.t_q, s.d_v, s.t_k, 1.0f, probs.data<float>(), s.square(),
              v.data<float>(), s.v, 0.0f, out.data<float>(), s.out);
  if (!autograd::any_needs_grad(in.edges)) return out;
  auto node = std::make_shared<AttentionBackward>();
  if (!recompute_probs(s)) node->probs = probs;
  node->s = s;
  node->causal = causal;
  return attach_attention(out, node, q, k, v, in);
}

// Whether `kernel` means the fused kernel for attention of dims `s` on `device`.
bool takes_fused(AttentionKernel kernel, const AttentionDims& s, Device device) {
  return kernel == AttentionKernel::Fused ||
         (kernel == AttentionKernel::Auto && device.is_cpu() && recompute_probs(s));
}

// The attention of float32 q, k and v (each read from its tensor as `s` lays it out) with the
// kernel `kernel` picks; its node's edges go to `in.edges`.
Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionDims& s,
              bool causal, AttentionKernel kernel, const AttentionInputs& in) {
  if (!takes_fused(kernel, s, q.device())) return plain_attention(q, k, v, s, causal, in);
  if (!q.device().is_cpu())
    throw std::invalid_argument(
        "scaled_dot_product_attention: the fused kernel runs on the host only; use "
        "AttentionKernel::Auto or Plain for tensors on " +
        to_string(q.device()));
  return fused_attention(q, k, v, s, causal, in);
}

// The output shape of attention: q's with v's head size.
Shape attention_out_shape(Shape q_shape, int64_t d_v) {
  q_shape.back() = d_v;
  return q_shape;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    AttentionKernel kernel) {
  if (detail::any_bfloat16({q, k, v}))
    return detail::in_float32({q, k, v}, detail::promoted_dtype({q, k, v}),
                              [causal, kernel](const std::vector<Tensor>& in) {
                                return scaled_dot_product_attention(in[0], in[1], in[2], causal,
                                                                    kernel);
                              });
  AttentionDims s = check_attention(q, k, v);
  set_contiguous_layouts(s);
  Tensor out = attend(q, k, v, s, causal, kernel,
                      {{q, k, v}, attention_out_shape(q.shape(), s.d_v), std::nullopt});
  return trace::record("scaled_dot_product_attention", {q, k, v}, out,
                       [causal, kernel](const std::vector<Tensor>& in) {
                         return scaled_dot_product_attention(in[0], in[1], in[2], causal, kernel);
                       });
}

Tensor scaled_dot_product_attention_packed(const Tensor& qkv, bool causal, AttentionKernel kernel) {
  const char* op = "scaled_dot_product_attention_packed";
  detail::check_defined(op, qkv, "qkv");
  if (qkv.dim() < 3 || qkv.shape()[0] != 3)
    throw std::invalid_argument(std::string(op) +
                                ": expected qkv [3, ..., T, D] (q, k and v stacked along dim 0); "
                                "got " +
                                to_string(qkv.shape()));
  const Shape part(qkv.shape().begin() + 1, qkv.shape().end());
  // bfloat16 takes the sliced form, whose float32 computation keeps q, k and v for the backward
  // as bfloat16 (a packed node would keep the widened copy).
  if (detail::any_bfloat16({qkv}))
    return scaled_dot_product_attention(qkv.slice0(0, 1).reshape(part),
                                        qkv.slice0(1, 2).reshape(part),
                                        qkv.slice0(2, 3).reshape(part), causal, kernel);
  const Tensor base = qkv.detach();
  AttentionDims s =
      check_attention(base.slice0(0, 1).reshape(part), base.slice0(1, 2).reshape(part),
                      base.slice0(2, 3).reshape(part));
  set_contiguous_layouts(s);
  // q, k and v are read from (and their gradients written to) the one tensor, a part apart.
  const int64_t part_numel = numel(part);
  s.k.offset = part_numel;
  s.v.offset = 2 * part_numel;
  Tensor out = attend(base, base, base, s, causal, kernel,
                      {{qkv}, attention_out_shape(part, s.d_v), qkv.shape()});
  return trace::record(op, {qkv}, out, [causal, kernel](const std::vector<Tensor>& in) {
    return scaled_dot_product_attention_packed(in[0], causal, kernel);
  });
}

Tensor scaled_dot_product_attention_interleaved(const Tensor& qkv, bool causal,
                                                AttentionKernel kernel) {
  const char* op = "scaled_dot_product_attention_interleaved";
  detail::check_defined(op, qkv, "qkv");
  if (qkv.dim() != 5 || qkv.shape()[2] != 3 || qkv.shape()[1] == 0 || qkv.shape()[4] == 0)
    throw std::invalid_argument(std::string(op) +
                                ": expected qkv [B, T, 3, H, D] with T and D at least 1 (a fused "
                                "q, k, v projection's output, reshaped); got " +
                                to_string(qkv.shape()));
  const int64_t batch = qkv.shape()[0], time = qkv.shape()[1], heads = qkv.shape()[3],
                head_dim = qkv.shape()[4];
  AttentionDims s;
  s.batch = batch * heads;
  s.t_q = s.t_k = time;
  s.d = s.d_v = head_dim;
  s.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  // The fused kernel, bfloat16 and other devices read q, k and v contiguous: one copy to
  // [3, B, H, T, D] and the packed op, and one copy of its output back.
  if (detail::any_bfloat16({qkv}) || !qkv.device().is_cpu() || takes_fused(kernel, s, qkv.device()))
    return permute(
        scaled_dot_product_attention_packed(permute(qkv, {2, 0, 3, 1, 4}), causal, kernel),
        {0, 2, 1, 3});
  // Batch b's heads are one group of matrices: head h of q starts h * D into a row of
  // [3, H, D], k a row's third further and v two; the output's rows are [H, D].
  const int64_t row = 3 * heads * head_dim;
  s.groups = batch;
  s.per_group = heads;
  s.q = {time * row, head_dim, row, 0};
  s.k = {time * row, head_dim, row, heads * head_dim};
  s.v = {time * row, head_dim, row, 2 * heads * head_dim};
  s.out = {time * heads * head_dim, head_dim, heads * head_dim, 0};
  const Tensor base = qkv.detach();
  Tensor out = attend(base, base, base, s, causal, kernel,
                      {{qkv}, Shape{batch, time, heads, head_dim}, qkv.shape()});
  return trace::record(op, {qkv}, out, [causal, kernel](const std::vector<Tensor>& in) {
    return scaled_dot_product_attention_interleaved(in[0], causal, kernel);
  });
}

}  // namespace tensorplay
