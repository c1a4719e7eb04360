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
#include "tensors/trace_hook.h"

namespace tensorplay {
namespace {

struct AttentionDims {
  int64_t batch = 1, t_q = 0, t_k = 0, d = 0, d_v = 0;
  float scale = 1.0f;
};

// P = softmax(scale q k^T) (causal: row i sees keys j <= i), [batch, t_q, t_k].
Tensor attention_probs(const Tensor& q, const Tensor& k, const AttentionDims& s, bool causal) {
  const Backend& be = detail::backend_of(q);
  Tensor probs = empty({s.batch, s.t_q, s.t_k}, {.device = q.device()});
  be.gemm_batched(false, true, s.batch, s.t_q, s.t_k, s.d, s.scale, q.data<float>(), s.d,
                  s.t_q * s.d, k.data<float>(), s.d, s.t_k * s.d, 0.0f, probs.data<float>(), s.t_k,
                  s.t_q * s.t_k);
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
// or (packed: the op took one [3, ...] tensor) the three parts of one such gradient, so that no
// zero-padded slice gradients are summed.
struct AttentionGrads {
  std::vector<Tensor> parts;  // dq, dk, dv (undefined: not requested yet)
  Tensor packed;              // defined for a packed op: what the node returns

  AttentionGrads(const Tensor& q, const std::optional<Shape>& packed_shape) : parts(3) {
    if (!packed_shape) return;
    packed = empty(*packed_shape, {.device = q.device()});
    for (int64_t i = 0; i < 3; ++i) parts[i] = packed.slice0(i, i + 1).reshape(q.shape());
  }
  // The part `i`, allocated with `like`'s shape when it is not one of the packed parts.
  Tensor& part(int i, const Tensor& like) {
    if (!parts[i].defined()) parts[i] = empty(like.shape(), {.device = like.device()});
    return parts[i];
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
    const int64_t pq = s.t_q * s.t_k;
    if (needed[2]) {  // dV = P^T dO
      Tensor& gv = out.part(2, v);
      be.gemm_batched(true, false, s.batch, s.t_k, s.d_v, s.t_q, 1.0f, p, s.t_k, pq,
                      g.data<float>(), s.d_v, s.t_q * s.d_v, 0.0f, gv.data<float>(), s.d_v,
                      s.t_k * s.d_v);
    }
    if (needed[0] || needed[1]) {
      // dS = softmax_backward(P, dO V^T), in one buffer.
      Tensor gs = empty({s.batch, s.t_q, s.t_k}, {.device = g.device()});
      be.gemm_batched(false, true, s.batch, s.t_q, s.t_k, s.d_v, 1.0f, g.data<float>(), s.d_v,
                      s.t_q * s.d_v, v.data<float>(), s.d_v, s.t_k * s.d_v, 0.0f, gs.data<float>(),
                      s.t_k, pq);
      be.softmax_backward(p, gs.data<float>(), gs.data<float>(), s.batch * s.t_q, s.t_k, 1, false);
      if (needed[0]) {  // dQ = scale * dS K
        Tensor& gq = out.part(0, q);
        be.gemm_batched(false, false, s.batch, s.t_q, s.d, s.t_k, s.scale, gs.data<float>(), s.t_k,
                        pq, k.data<float>(), s.d, s.t_k * s.d, 0.0f, gq.data<float>(), s.d,
                        s.t_q * s.d);
      }
      if (needed[1]) {  // dK = scale * dS^T Q
        Tensor& gk = out.part(1, k);
        be.gemm_batched(true, false, s.batch, s.t_k, s.d, s.t_q, s.scale, gs.data<float>(), s.t_k,
                        pq, q.data<float>(), s.d, s.t_q * s.d, 0.0f, gk.data<float>(), s.d,
                        s.t_k * s.d);
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
  AttentionDims s;
  bool causal = false;
  std::optional<Shape> packed_shape;  // set when the op took one packed [3, ...] tensor
  const char* name() const override { return "FlashAttentionBackward"; }
  std::vector<Tensor> apply(const Tensor& g, const std::vector<bool>& flags) override {
    const std::vector<bool> needed = wanted(flags, packed_shape.has_value());
    AttentionGrads grads(q, packed_shape);
    for (int i = 0; i < 3; ++i)
      if (needed[i]) grads.part(i, i == 0 ? q : i == 1 ? k : v);
    auto data = [](Tensor& t) { return t.defined() ? t.data<float>() : nullptr; };
    detail::backend_of(g).flash_attention_backward(
        q.data<float>(), k.data<float>(), v.data<float>(), out.data<float>(), lse.data<float>(),
        g.data<float>(), data(grads.parts[0]), data(grads.parts[1]), data(grads.parts[2]), s.batch,
        s.t_q, s.t_k, s.d, s.d_v, s.scale, causal);
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

// A node's inputs and, for a packed op, the shape of its one input.
struct AttentionInputs {
  std::vector<Tensor> edges;          // q, k, v; or the packed tensor
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

Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionDims& s,
                       bool causal, const AttentionInputs& in) {
  Shape out_shape = q.shape();
  out_shape.back() = s.d_v;
  Tensor out = empty(out_shape, {.device = q.device()});
  Tensor lse = empty({s.batch, s.t_q}, {.device = q.device()});
  detail::backend_of(q).flash_attention(q.data<float>(), k.data<float>(), v.data<float>(),
                                        out.data<float>(), lse.data<float>(), s.batch, s.t_q, s.t_k,
                                        s.d, s.d_v, s.scale, causal);
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
  const int64_t pq = s.t_q * s.t_k;
  Tensor probs = attention_probs(q, k, s, causal);
  Shape out_shape = q.shape();
  out_shape.back() = s.d_v;
  Tensor out = empty(out_shape, {.device = q.device()});
  be.gemm_batched(false, false, s.batch, s.t_q, s.d_v, s.t_k, 1.0f, probs.data<float>(), s.t_k, pq,
                  v.data<float>(), s.d_v, s.t_k * s.d_v, 0.0f, out.data<float>(), s.d_v,
                  s.t_q * s.d_v);
  if (!autograd::any_needs_grad(in.edges)) return out;
  auto node = std::make_shared<AttentionBackward>();
  if (!recompute_probs(s)) node->probs = probs;
  node->s = s;
  node->causal = causal;
  return attach_attention(out, node, q, k, v, in);
}

// The attention of float32 q, k and v with the kernel `kernel` picks; its node's edges go to
// `in.edges`.
Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
              AttentionKernel kernel, const AttentionInputs& in) {
  AttentionDims s = check_attention(q, k, v);
  const bool fused = kernel == AttentionKernel::Fused ||
                     (kernel == AttentionKernel::Auto && q.device().is_cpu() && recompute_probs(s));
  if (!fused) return plain_attention(q, k, v, s, causal, in);
  if (!q.device().is_cpu())
    throw std::invalid_argument(
        "scaled_dot_product_attention: the fused kernel runs on the host only; use "
        "AttentionKernel::Auto or Plain for tensors on " +
        to_string(q.device()));
  return fused_attention(q, k, v, s, causal, in);
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
  Tensor out = attend(q, k, v, causal, kernel, {{q, k, v}, std::nullopt});
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
  Tensor out = attend(base.slice0(0, 1).reshape(part), base.slice0(1, 2).reshape(part),
                      base.slice0(2, 3).reshape(part), causal, kernel, {{qkv}, qkv.shape()});
  return trace::record(op, {qkv}, out, [causal, kernel](const std::vector<Tensor>& in) {
    return scaled_dot_product_attention_packed(in[0], causal, kernel);
  });
}

}  // namespace tensorplay
