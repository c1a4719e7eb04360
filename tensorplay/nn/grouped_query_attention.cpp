// Grouped-query causal self-attention module with rotary positions.
#include "tensorplay/nn/grouped_query_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "tensorplay/core/ops/attention.h"
#include "tensorplay/core/ops/elementwise.h"
#include "tensorplay/core/ops/linear_algebra.h"
#include "tensorplay/core/ops/shape_ops.h"
#include "tensorplay/core/ops/softmax.h"

namespace tensorplay::nn {
namespace {

void check_options(const GroupedQueryAttentionOptions& o) {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("GroupedQueryAttention: " + what);
  };
  if (o.width <= 0 || o.heads <= 0 || o.kv_heads <= 0 || o.context_length <= 0)
    fail("width, heads, kv_heads and context_length must be positive, got " +
         std::to_string(o.width) + ", " + std::to_string(o.heads) + ", " +
         std::to_string(o.kv_heads) + ", " + std::to_string(o.context_length));
  if (o.head_dim < 0 || o.sliding_window < 0)
    fail("head_dim and sliding_window must be positive (or 0 for none), got " +
         std::to_string(o.head_dim) + " and " + std::to_string(o.sliding_window));
  if (o.head_dim == 0 && o.width % o.heads != 0)
    fail("heads (" + std::to_string(o.heads) + ") must divide width (" + std::to_string(o.width) +
         "), or head_dim must be given");
  if (o.heads % o.kv_heads != 0)
    fail("kv_heads (" + std::to_string(o.kv_heads) + ") must divide heads (" +
         std::to_string(o.heads) + ")");
  const int64_t d = o.head_dim > 0 ? o.head_dim : o.width / o.heads;
  if (d % 2 != 0)
    fail("the head size (" + std::to_string(d) + ") must be even for rotary positions");
}

// x [B, ..., kv, ...] with each head of dimension `head_dim` repeated `groups` times in place
// (head h of the result is head h / groups of x). The batch stays -1 so that a traced stage
// replays on microbatches of any size.
Tensor repeat_heads(const Tensor& x, int64_t head_dim, int64_t groups) {
  if (groups == 1) return x;
  Shape out = x.shape();
  const int64_t kv = out[head_dim];
  const int64_t inner = numel_range(out, head_dim + 1, x.dim());
  std::vector<Tensor> copies(static_cast<size_t>(groups), x.reshape({-1, kv, 1, inner}));
  out[0] = -1;
  out[head_dim] = kv * groups;
  return cat(copies, 2).reshape(out);
}

}  // namespace

Tensor repeat_kv(const Tensor& x, int64_t groups) {
  if (x.dim() != 4 || groups <= 0)
    throw std::invalid_argument("repeat_kv: expected [B, kv_heads, T, D] and groups > 0, got " +
                                to_string(x.shape()) + " and " + std::to_string(groups));
  return repeat_heads(x, 1, groups);
}

Tensor repeat_kv_tokens_first(const Tensor& x, int64_t groups) {
  if (x.dim() != 4 || groups <= 0)
    throw std::invalid_argument(
        "repeat_kv_tokens_first: expected [B, T, kv_heads, D] and groups > 0, got " +
        to_string(x.shape()) + " and " + std::to_string(groups));
  return repeat_heads(x, 2, groups);
}

GroupedQueryAttentionImpl::GroupedQueryAttentionImpl(GroupedQueryAttentionOptions options)
    : options_(options) {
  check_options(options);
  const int64_t d = head_dim(), w = options.width;
  const LinearOptions qkv{.bias = options.qkv_bias}, o{.bias = options.o_bias};
  q_proj = register_module("q_proj", Linear(w, options.heads * d, qkv));
  k_proj = register_module("k_proj", Linear(w, options.kv_heads * d, qkv));
  v_proj = register_module("v_proj", Linear(w, options.kv_heads * d, qkv));
  o_proj = register_module("o_proj", Linear(options.heads * d, w, o));
  if (options.qk_norm) {
    q_norm = register_module("q_norm", RMSNorm(d, options.norm_eps));
    k_norm = register_module("k_norm", RMSNorm(d, options.norm_eps));
  }
  rotary_emb = register_module(
      "rotary_emb",
      RotaryEmbedding(d, options.context_length, options.rope_theta, options.rope_scaling));
  rotary_emb->time_dim = 1;  // queries and keys stay [B, T, heads, D]
}

Tensor GroupedQueryAttentionImpl::forward(const Tensor& x) {
  const int64_t w = options_.width;
  if (x.dim() != 3 || x.size(2) != w || x.size(1) > options_.context_length)
    throw std::invalid_argument(
        "GroupedQueryAttention: expected input [B, T, " + std::to_string(w) +
        "] with T <= " + std::to_string(options_.context_length) + ", got " + to_string(x.shape()));
  const int64_t d = head_dim();
  // [B, T, heads * D] -> [B, T, heads, D], a view: the heads stay where the projection wrote
  // them. The batch size stays -1 so that a traced stage replays on microbatches of any size.
  // The head counts are read from the projections' outputs: under tensor parallelism they hold
  // this rank's share of the heads (and of the key-value heads, or the one its queries read).
  // The sequence too: under sequence parallelism x holds this rank's positions and the
  // projections gather them all.
  auto split_heads = [&](const Tensor& y) { return y.reshape({-1, y.size(1), y.size(-1) / d, d}); };
  Tensor q = split_heads(q_proj(x));
  const int64_t time = q.size(1);
  Tensor k = split_heads(k_proj(x));
  const int64_t heads = q.size(2), kv = k.size(2);
  if (heads % kv != 0)
    throw std::invalid_argument("GroupedQueryAttention: " + std::to_string(kv) +
                                " key-value heads do not divide " + std::to_string(heads) +
                                " query heads (projections sharded unevenly?)");
  if (options_.qk_norm) {
    q = q_norm(q);
    k = k_norm(k);
  }
  q = rotary_emb(q);
  k = rotary_emb(k);
  Tensor v = split_heads(v_proj(x));
  k = repeat_kv_tokens_first(k, heads / kv);
  v = repeat_kv_tokens_first(v, heads / kv);
  Tensor y = options_.sliding_window > 0 && time > options_.sliding_window
                 ? sliding_window_attention(q, k, v)
                 : scaled_dot_product_attention_tokens_first(q, k, v, /*causal=*/true);
  return o_proj(y.reshape({-1, time, heads * d}));
}

Tensor GroupedQueryAttentionImpl::sliding_window_attention(const Tensor& q, const Tensor& k,
                                                           const Tensor& v) const {
  // The composed form with a band mask: query i sees keys j with 0 <= i - j < window, as
  // transformers' sliding-window mask. [B, T, H, D] -> [B, H, T, D] for the products.
  const int64_t time = q.size(1), window = options_.sliding_window, d = head_dim();
  std::vector<float> band(static_cast<size_t>(time * time),
                          -std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < time; ++i)
    for (int64_t j = std::max<int64_t>(0, i - window + 1); j <= i; ++j) band[i * time + j] = 0.0f;
  Tensor mask = from_vector(band, {time, time}).to(q.device());
  const Tensor qh = permute(q, {0, 2, 1, 3}), kh = permute(k, {0, 2, 1, 3}),
               vh = permute(v, {0, 2, 1, 3});
  Tensor scores = matmul(qh, transpose(kh, -2, -1)) * (1.0f / std::sqrt(static_cast<float>(d)));
  if (mask.dtype() != scores.dtype()) mask = mask.to(scores.dtype());
  const Tensor y = matmul(softmax(scores + mask, -1), vh);  // [B, H, T, D]
  return permute(y, {0, 2, 1, 3});
}

std::string GroupedQueryAttentionImpl::extra_repr() const {
  return "width=" + std::to_string(options_.width) + ", heads=" + std::to_string(options_.heads) +
         ", kv_heads=" + std::to_string(options_.kv_heads) +
         ", head_dim=" + std::to_string(head_dim()) + (options_.qkv_bias ? ", qkv_bias" : "") +
         (options_.o_bias ? ", o_bias" : "") + (options_.qk_norm ? ", qk_norm" : "") +
         (options_.sliding_window > 0
              ? ", sliding_window=" + std::to_string(options_.sliding_window)
              : "");
}

}  // namespace tensorplay::nn
