// GroupedQueryAttention: causal self-attention with rotary positions where groups of query heads
// share one key-value head (transformers' LlamaAttention), with transformers' child names.
#pragma once

#include "tensorplay/nn/linear.h"
#include "tensorplay/nn/module.h"
#include "tensorplay/nn/rms_norm.h"
#include "tensorplay/nn/rotary.h"

namespace tensorplay::nn {

/// Sizes of a GroupedQueryAttention.
struct GroupedQueryAttentionOptions {
  int64_t width = 0;           // model width
  int64_t heads = 0;           // query heads, each of head_dim channels
  int64_t kv_heads = 0;        // key-value heads; must divide heads (heads: plain multi-head)
  int64_t context_length = 0;  // longest sequence (the rotary tables' length)
  float rope_theta = 10000.0f;
  int64_t head_dim = 0;        // channels per head, even; 0 means width / heads
  bool qkv_bias = false;       // q_proj, k_proj and v_proj with a bias (Qwen2)
  bool o_bias = false;         // o_proj with a bias (Llama's attention_bias sets both)
  bool qk_norm = false;        // q_norm and k_norm, RMSNorm(head_dim) of each head (Qwen3)
  float norm_eps = 1e-6f;      // qk_norm's epsilon
  RotaryScaling rope_scaling;  // see RotaryScaling
  /// Mistral's sliding window: a token attends to the `sliding_window` latest tokens, itself
  /// included. 0: none. Sequences longer than the window take the composed attention (products,
  /// a band mask, softmax: the [T, T] scores held); shorter ones the causal kernels.
  int64_t sliding_window = 0;
};

/// x [B, T, width] -> [B, T, width]. Children, in order: `q_proj` Linear(width, heads * D),
/// `k_proj` and `v_proj` Linear(width, kv_heads * D) (biased with qkv_bias), `o_proj`
/// Linear(heads * D, width) (biased with o_bias), with qk_norm `q_norm` and `k_norm`
/// RMSNorm(D, norm_eps) applied to each head of the queries and keys before their rotation (as
/// Qwen3), and `rotary_emb` RotaryEmbedding(D, context_length, rope_theta, rope_scaling) (no
/// state). D is head_dim, or width / heads when that is 0.
///
/// Queries and keys are turned by their position (rotate-half layout, as transformers); query
/// head h attends to key-value head h / (heads / kv_heads) at positions <= its own, through
/// scaled_dot_product_attention_tokens_first (which picks the fused kernel for long contexts):
/// heads stay where the projections wrote them ([B, T, heads, D]), with no permute. With
/// kv_heads < heads each key-value head is repeated for its group first, as transformers'
/// repeat_kv does, so the result is multi-head attention with repeated keys and values.
class GroupedQueryAttentionImpl : public Module {
 public:
  /// Throws std::invalid_argument naming a size that is not positive, heads not dividing width
  /// (without head_dim), kv_heads not dividing heads, or an odd head size.
  explicit GroupedQueryAttentionImpl(GroupedQueryAttentionOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GroupedQueryAttention"; }
  std::string extra_repr() const override;
  const GroupedQueryAttentionOptions& options() const { return options_; }
  int64_t head_dim() const {
    return options_.head_dim > 0 ? options_.head_dim : options_.width / options_.heads;
  }

  Linear q_proj{nullptr};
  Linear k_proj{nullptr};
  Linear v_proj{nullptr};
  Linear o_proj{nullptr};
  RMSNorm q_norm{nullptr};  // with qk_norm only
  RMSNorm k_norm{nullptr};  // with qk_norm only
  RotaryEmbedding rotary_emb{nullptr};

 private:
  // Attention of q, k, v [B, T, heads, D] (k and v repeated) within the sliding window.
  Tensor sliding_window_attention(const Tensor& q, const Tensor& k, const Tensor& v) const;
  GroupedQueryAttentionOptions options_;
};
TENSORPLAY_MODULE(GroupedQueryAttention);

/// Key-value heads [B, kv_heads, T, D] repeated `groups` times each, head by head:
/// [B, kv_heads * groups, T, D] whose head h is input head h / groups (transformers' repeat_kv).
Tensor repeat_kv(const Tensor& x, int64_t groups);
/// repeat_kv for heads laid out tokens first: [B, T, kv_heads, D] -> [B, T, kv_heads * groups, D].
Tensor repeat_kv_tokens_first(const Tensor& x, int64_t groups);

}  // namespace tensorplay::nn
