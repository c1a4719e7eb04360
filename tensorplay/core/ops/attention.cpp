// Attention through batched gemms and a (causal) row softmax. The backward needs the attention
// probabilities P: dV = P^T dO, dS = softmax'(P, dO V^T), dQ = dS K / sqrt(D), dK = dS^T Q /
// sqrt(D). P is kept when it is smaller than q, k and v together, and recomputed from them (the
// same kernels on the same inputs, so the same bits) when it is larger: for long sequences P
// would dominate the memory a stage holds per microbatch. Each input's gradient is computed the
// same way whichever are requested. On the host, long contexts take the fused kernel instead
// (cpu/flash_attention.cpp): tiles with an online softmax, keeping only a log-sum-exp per row.
#include "tensorplay/core/ops/attention.h"

#include <cmath>
#include <optional>
#include <stdexcept>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/ops/detail/op_support.h"
#include "tensorplay/core/ops/shape_ops.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay {
namespace {

// Where an op's q, k and v are: three tensors, or one packed tensor holding all three at element
// offsets (the layouts of the geometry say how their heads lie).
struct AttentionInputs {
  std::vector<Tensor> tensors;     // q, k, v; or the packed tensor alone
  int64_t offsets[3] = {0, 0, 0};  // packed: where q, k and v start in it

  bool packed() const { return tensors.size() == 1; }
  const float* data(int i) const {
    return packed() ? tensors[0].data<float>() + offsets[i] : tensors[i].data<float>();
  }
  AttentionInputs detached() const {
    AttentionInputs out = *this;
    for (Tensor& t : out.tensors) t = t.detach();
    return out;
  }
};

// Contiguous heads of rows of n: [..., t, n] as one group.
HeadStrides contiguous(int64_t t, int64_t n) { return {0, t * n, n}; }

// Tokens first: heads of n values side by side in rows `row` apart, t rows a batch element
// ([B, T, H, n], or q, k or v in [B, T, 3, H, n]).
HeadStrides tokens_first(int64_t t, int64_t n, int64_t row) { return {t * row, n, row}; }

// The geometry of heads laid out tokens first: q [B, Tq, H, D], k [B, Tk, H, D] and
// v [B, Tk, H, Dv], each one of `stacked` parts side by side in its rows (3 in a fused
// projection's [B, T, 3, H, D], else 1), and out [B, Tq, H, Dv].
AttentionGeometry tokens_first_geometry(int64_t batch, int64_t heads, int64_t t_q, int64_t t_k,
                                        int64_t d, int64_t d_v, bool causal, int64_t stacked) {
  AttentionGeometry g;
  g.groups = batch;
  g.heads = heads;
  g.t_q = t_q;
  g.t_k = t_k;
  g.d = d;
  g.d_v = d_v;
  g.scale = 1.0f / std::sqrt(static_cast<float>(d));
  g.causal = causal;
  g.q = tokens_first(t_q, d, stacked * heads * d);
  g.k = tokens_first(t_k, d, stacked * heads * d);
  g.v = tokens_first(t_k, d_v, stacked * heads * d_v);
  g.out = tokens_first(t_q, d_v, heads * d_v);
  return g;
}

// The probabilities [batch, t_q, t_k], contiguous, grouped as the geometry groups its heads.
HeadStrides probs_strides(const AttentionGeometry& g) {
  return {g.heads * g.t_q * g.t_k, g.t_q * g.t_k, g.t_k};
}

// An operand of one group's batched product: where all groups start, and how heads lie.
struct HeadOperand {
  const float* at;
  HeadStrides strides;
};

// C = alpha op(A) op(B) + beta C for the heads of group `group`, as one batched product.
void group_gemm(const Backend& be, const AttentionGeometry& g, int64_t group, bool ta, bool tb,
                int64_t m, int64_t n, int64_t k, float alpha, HeadOperand a, HeadOperand b,
                float beta, float* c, const HeadStrides& cs) {
  be.gemm_batched(ta, tb, g.heads, m, n, k, alpha, a.at + a.strides.offset(group, 0), a.strides.row,
                  a.strides.head, b.at + b.strides.offset(group, 0), b.strides.row, b.strides.head,
                  beta, c + cs.offset(group, 0), cs.row, cs.head);
}

// Group `group`'s part of P = softmax(scale q k^T) (causal: row i sees keys j <= i) in probs
// [batch, t_q, t_k]. Group by group, the probabilities a group's next products read are still in
// the core's cache.
void group_probs(const Backend& be, const AttentionInputs& in, const AttentionGeometry& g,
                 int64_t group, float* probs) {
  const HeadStrides ps = probs_strides(g);
  group_gemm(be, g, group, false, true, g.t_q, g.t_k, g.d, g.scale, {in.data(0), g.q},
             {in.data(1), g.k}, 0.0f, probs, ps);
  float* p = probs + ps.offset(group, 0);
  if (g.causal)
    be.causal_softmax(p, p, g.heads, g.t_q, g.t_k);
  else
    be.softmax(p, p, g.heads * g.t_q, g.t_k, 1, false);
}

// Whether the backward recomputes P rather than keeping it: P is larger than q, k and v.
bool recompute_probs(const AttentionGeometry& g) {
  return g.t_q * g.t_k > g.t_q * g.d + g.t_k * (g.d + g.d_v);
}

// Where the backward of attention writes dq, dk and dv: three tensors of q's, k's and v's shapes,
// or (packed) the three parts of one gradient of the packed tensor's shape, so that no
// zero-padded slice gradients are summed. A packed op computes all three.
struct AttentionGrads {
  const AttentionInputs& in;
  std::vector<Tensor> parts;  // dq, dk, dv (undefined: not requested); or the packed gradient

  AttentionGrads(const AttentionInputs& inputs, const std::vector<bool>& needed) : in(inputs) {
    for (size_t i = 0; i < in.tensors.size(); ++i)
      if (in.packed() || needed[i])
        parts.push_back(empty(in.tensors[i].shape(), {.device = in.tensors[i].device()}));
      else
        parts.emplace_back();
  }
  float* data(int i) {
    if (in.packed()) return parts[0].data<float>() + in.offsets[i];
    return parts[i].defined() ? parts[i].data<float>() : nullptr;
  }
};

// The requested flags of a node's three gradients: a packed node computes all three.
std::vector<bool> wanted(const std::vector<bool>& needed, bool packed) {
  return packed ? std::vector<bool>{needed[0], needed[0], needed[0]} : needed;
}

// What both attention nodes save of their inputs.
struct AttentionNode : autograd::Node {
  AttentionInputs in;  // detached
  AttentionGeometry g;
  void release() override { in.tensors.clear(); }
  std::vector<Tensor*> saved_tensors() override {
    std::vector<Tensor*> saved;
    for (Tensor& t : in.tensors) saved.push_back(&t);
    return saved;
  }
};

struct AttentionBackward : AttentionNode {
  Tensor probs;  // undefined when recomputed
  const char* name() const override { return "ScaledDotProductAttentionBackward"; }
  std::vector<Tensor> apply(const Tensor& grad, const std::vector<bool>& flags) override {
    const std::vector<bool> needed = wanted(flags, in.packed());
    AttentionGrads out(in, needed);
    const Backend& be = detail::backend_of(grad);
    const Device device = grad.device();
    const Tensor p = probs.defined() ? probs : empty({g.batch(), g.t_q, g.t_k}, {.device = device});
    const HeadOperand ps{p.data<float>(), probs_strides(g)};
    const HeadOperand gout{grad.data<float>(), g.out};
    Tensor gs;  // dS, as P lies
    if (needed[0] || needed[1]) gs = empty({g.batch(), g.t_q, g.t_k}, {.device = device});
    for (int64_t group = 0; group < g.groups; ++group) {
      if (!probs.defined()) group_probs(be, in, g, group, p.data<float>());  // recomputed
      if (needed[2])                                                         // dV = P^T dO
        group_gemm(be, g, group, true, false, g.t_k, g.d_v, g.t_q, 1.0f, ps, gout, 0.0f,
                   out.data(2), g.v);
      if (!gs.defined()) continue;
      // dS = softmax_backward(P, dO V^T), in one buffer.
      group_gemm(be, g, group, false, true, g.t_q, g.t_k, g.d_v, 1.0f, gout, {in.data(2), g.v},
                 0.0f, gs.data<float>(), ps.strides);
      const int64_t at = ps.strides.offset(group, 0);
      be.softmax_backward(ps.at + at, gs.data<float>() + at, gs.data<float>() + at, g.heads * g.t_q,
                          g.t_k, 1, false);
      const HeadOperand ds{gs.data<float>(), ps.strides};
      if (needed[0])  // dQ = scale * dS K
        group_gemm(be, g, group, false, false, g.t_q, g.d, g.t_k, g.scale, ds, {in.data(1), g.k},
                   0.0f, out.data(0), g.q);
      if (needed[1])  // dK = scale * dS^T Q
        group_gemm(be, g, group, true, false, g.t_k, g.d, g.t_q, g.scale, ds, {in.data(0), g.q},
                   0.0f, out.data(1), g.k);
    }
    return out.parts;
  }
  void release() override {
    AttentionNode::release();
    probs = Tensor();
  }
};

struct FlashAttentionBackward : AttentionNode {
  Tensor out, lse;
  const char* name() const override { return "FlashAttentionBackward"; }
  std::vector<Tensor> apply(const Tensor& grad, const std::vector<bool>& flags) override {
    AttentionGrads grads(in, wanted(flags, in.packed()));
    detail::backend_of(grad).flash_attention_backward(
        g, in.data(0), in.data(1), in.data(2), out.data<float>(), lse.data<float>(),
        grad.data<float>(), grads.data(0), grads.data(1), grads.data(2));
    return grads.parts;
  }
  void release() override {
    AttentionNode::release();
    out = Tensor();
    lse = Tensor();
  }
  std::vector<Tensor*> saved_tensors() override {
    std::vector<Tensor*> saved = AttentionNode::saved_tensors();
    saved.push_back(&out);
    saved.push_back(&lse);
    return saved;
  }
};

// q, k and v are defined and on one device.
void check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  detail::check_defined(op, q, "q");
  detail::check_defined(op, k, "k");
  detail::check_defined(op, v, "v");
  detail::check_same_device(op, q, k);
  detail::check_same_device(op, q, v);
}

// The geometry of contiguous q [..., t_q, d], k [..., t_k, d], v [..., t_k, d_v].
AttentionGeometry check_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  const char* op = "scaled_dot_product_attention";
  check_qkv(op, q, k, v);
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
  AttentionGeometry g;
  g.heads = numel_range(q.shape(), 0, r - 2);
  g.t_q = q.shape()[r - 2];
  g.d = q.shape()[r - 1];
  g.t_k = k.shape()[r - 2];
  g.d_v = v.shape()[r - 1];
  if (k.shape()[r - 1] != g.d)
    throw std::invalid_argument(std::string(op) + ": q and k head sizes differ: " + shapes());
  if (v.shape()[r - 2] != g.t_k)
    throw std::invalid_argument(std::string(op) + ": k and v sequence lengths differ: " + shapes());
  if (g.d == 0 || g.t_k == 0)
    throw std::invalid_argument(std::string(op) + ": empty head size or key sequence: " + shapes());
  g.scale = 1.0f / std::sqrt(static_cast<float>(g.d));
  g.causal = causal;
  g.q = contiguous(g.t_q, g.d);
  g.k = contiguous(g.t_k, g.d);
  g.v = contiguous(g.t_k, g.d_v);
  g.out = contiguous(g.t_q, g.d_v);
  return g;
}

template <typename NodeType>
Tensor attach_attention(Tensor out, std::shared_ptr<NodeType> node, const AttentionInputs& in,
                        const AttentionGeometry& g) {
  node->in = in.detached();
  node->g = g;
  return autograd::attach(out, node, in.tensors);
}

Tensor fused_attention(const AttentionInputs& in, const AttentionGeometry& g, Shape out_shape) {
  const Device device = in.tensors[0].device();
  Tensor out = empty(out_shape, {.device = device});
  Tensor lse = empty({g.batch(), g.t_q}, {.device = device});
  backend_for(device).flash_attention(g, in.data(0), in.data(1), in.data(2), out.data<float>(),
                                      lse.data<float>());
  if (!autograd::any_needs_grad(in.tensors)) return out;
  auto node = std::make_shared<FlashAttentionBackward>();
  node->out = out.detach();
  node->lse = lse;
  return attach_attention(out, node, in, g);
}

Tensor plain_attention(const AttentionInputs& in, const AttentionGeometry& g, Shape out_shape) {
  const Device device = in.tensors[0].device();
  const Backend& be = backend_for(device);
  Tensor probs = empty({g.batch(), g.t_q, g.t_k}, {.device = device});
  Tensor out = empty(out_shape, {.device = device});
  for (int64_t group = 0; group < g.groups; ++group) {
    group_probs(be, in, g, group, probs.data<float>());
    group_gemm(be, g, group, false, false, g.t_q, g.d_v, g.t_k, 1.0f,
               {probs.data<float>(), probs_strides(g)}, {in.data(2), g.v}, 0.0f, out.data<float>(),
               g.out);
  }
  if (!autograd::any_needs_grad(in.tensors)) return out;
  auto node = std::make_shared<AttentionBackward>();
  if (!recompute_probs(g)) node->probs = probs;
  return attach_attention(out, node, in, g);
}

// The attention of float32 inputs with the kernel `kernel` picks, output of `out_shape`.
Tensor attend(const AttentionInputs& in, const AttentionGeometry& g, AttentionKernel kernel,
              Shape out_shape) {
  const bool on_host = in.tensors[0].device().is_cpu();
  const bool fused = kernel == AttentionKernel::Fused ||
                     (kernel == AttentionKernel::Auto && on_host && recompute_probs(g));
  if (!fused) return plain_attention(in, g, std::move(out_shape));
  if (!on_host)
    throw std::invalid_argument(
        "scaled_dot_product_attention: the fused kernel runs on the host only; use "
        "AttentionKernel::Auto or Plain for tensors on " +
        to_string(in.tensors[0].device()));
  return fused_attention(in, g, std::move(out_shape));
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
  const AttentionGeometry g = check_attention(q, k, v, causal);
  Shape out_shape = q.shape();
  out_shape.back() = g.d_v;
  Tensor out = attend({{q, k, v}}, g, kernel, std::move(out_shape));
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
  const Tensor q = qkv.detach().slice0(0, 1).reshape(part);
  const AttentionGeometry g = check_attention(q, q, q, causal);
  const int64_t n = q.numel();
  Tensor out = attend({{qkv}, {0, n, 2 * n}}, g, kernel, part);
  return trace::record(op, {qkv}, out, [causal, kernel](const std::vector<Tensor>& in) {
    return scaled_dot_product_attention_packed(in[0], causal, kernel);
  });
}

Tensor scaled_dot_product_attention_qkvpacked(const Tensor& qkv, bool causal,
                                              AttentionKernel kernel) {
  const char* op = "scaled_dot_product_attention_qkvpacked";
  detail::check_defined(op, qkv, "qkv");
  if (qkv.dim() != 5 || qkv.shape()[2] != 3 || qkv.shape()[1] == 0 || qkv.shape()[4] == 0)
    throw std::invalid_argument(std::string(op) +
                                ": expected qkv [B, T, 3, H, D] (a fused projection's output) "
                                "with T and D above 0; got " +
                                to_string(qkv.shape()));
  // bfloat16 takes the stacked form (its float32 computation keeps q, k and v as bfloat16).
  if (detail::any_bfloat16({qkv}))
    return permute(
        scaled_dot_product_attention_packed(permute(qkv, {2, 0, 3, 1, 4}), causal, kernel),
        {0, 2, 1, 3});
  const int64_t batch = qkv.size(0), time = qkv.size(1), heads = qkv.size(3), d = qkv.size(4);
  const AttentionGeometry g = tokens_first_geometry(batch, heads, time, time, d, d, causal, 3);
  Tensor out = attend({{qkv}, {0, heads * d, 2 * heads * d}}, g, kernel, {batch, time, heads, d});
  return trace::record(op, {qkv}, out, [causal, kernel](const std::vector<Tensor>& in) {
    return scaled_dot_product_attention_qkvpacked(in[0], causal, kernel);
  });
}

Tensor scaled_dot_product_attention_tokens_first(const Tensor& q, const Tensor& k, const Tensor& v,
                                                 bool causal, AttentionKernel kernel) {
  const char* op = "scaled_dot_product_attention_tokens_first";
  check_qkv(op, q, k, v);
  const bool fits = q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && k.size(0) == q.size(0) &&
                    v.size(0) == q.size(0) && k.size(2) == q.size(2) && v.size(2) == q.size(2) &&
                    k.size(3) == q.size(3) && v.size(1) == k.size(1) && q.size(3) > 0 &&
                    k.size(1) > 0;
  if (!fits)
    throw std::invalid_argument(std::string(op) +
                                ": expected q [B, Tq, H, D], k [B, Tk, H, D] and v [B, Tk, H, Dv] "
                                "with D and Tk above 0; got q " +
                                to_string(q.shape()) + ", k " + to_string(k.shape()) + ", v " +
                                to_string(v.shape()));
  if (detail::any_bfloat16({q, k, v}))
    return detail::in_float32({q, k, v}, detail::promoted_dtype({q, k, v}),
                              [causal, kernel](const std::vector<Tensor>& in) {
                                return scaled_dot_product_attention_tokens_first(
                                    in[0], in[1], in[2], causal, kernel);
                              });
  const AttentionGeometry g = tokens_first_geometry(q.size(0), q.size(2), q.size(1), k.size(1),
                                                    q.size(3), v.size(3), causal, 1);
  Tensor out = attend({{q, k, v}}, g, kernel, {g.groups, g.t_q, g.heads, g.d_v});
  return trace::record(op, {q, k, v}, out, [causal, kernel](const std::vector<Tensor>& in) {
    return scaled_dot_product_attention_tokens_first(in[0], in[1], in[2], causal, kernel);
  });
}

}  // namespace tensorplay
