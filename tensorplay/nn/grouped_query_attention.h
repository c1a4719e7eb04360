// GroupedQueryAttention: causal self-attention with rotary positions where groups of query heads
// share one key-value head (transformers' LlamaAttention), with transformers' child names.
#pragma once

#include "tensorplay/nn/linear.h"
#include "tensorplay/nn/module.h"
#include "tensorplay/nn/rotary.h"

namespace tensorplay::nn {

/// Sizes of a GroupedQueryAttention.
struct GroupedQueryAttentionOptions {
  int64_t width = 0;           // model width; heads must divide it
  int64_t heads = 0;           // query heads, each of head_dim = width / heads channels
  int64_t kv_heads = 0;        // key-value heads; must divide heads (heads: plain multi-head)
  int64_t context_length = 0;  // longest sequence (the rotary tables' length)
  float rope_theta = 10000.0f;
};

/// x [B, T, width] -> [B, T, width]. Children, in order: `q_proj` Linear(width, heads * D),
/// `k_proj` and `v_proj` Linear(width, kv_heads * D), `o_proj` Linear(heads * D, width), none
/// with a bias, and `rotary_emb` RotaryEmbedding(D, context_length, rope_theta) (no state).
///
/// Queries and keys are turned by their position (rotate-half layout, as transformers); query
/// head h attends to key-value head h / (heads / kv_heads) at positions <= its own, through
/// scaled_dot_product_attention_tokens_first (which picks the fused kernel for long contexts):
/// heads stay where the projections wrote them ([B, T, heads, D]), with no permute. With
/// kv_heads < heads each key-value head is repeated for its group first, as transformers'
/// repeat_kv does, so the result is multi-head attention with repeated keys and values.
class GroupedQueryAttentionImpl : public Module {
 public:
  /// Throws std::invalid_argument naming a size that is not positive, heads not dividing width,
  /// kv_heads not dividing heads, or an odd head size.
  explicit GroupedQueryAttentionImpl(GroupedQueryAttentionOptions options);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GroupedQueryAttention"; }
  std::string extra_repr() const override;
  const GroupedQueryAttentionOptions& options() const { return options_; }
  int64_t head_dim() const { return options_.width / options_.heads; }

  Linear q_proj{nullptr};
  Linear k_proj{nullptr};
  Linear v_proj{nullptr};
  Linear o_proj{nullptr};
  RotaryEmbedding rotary_emb{nullptr};

 private:
  GroupedQueryAttentionOptions options_;
};
TENSORPLAY_MODULE(GroupedQueryAttention);

/// Key-value heads [B, kv_heads, T, D] repeated `groups` times each, head by head:
/// [B, kv_heads * groups, T, D] whose head h is input head h / groups (transformers' repeat_kv).
Tensor repeat_kv(const Tensor& x, int64_t groups);
/// repeat_kv for heads laid out tokens first: [B, T, kv_heads, D] -> [B, T, kv_heads * groups, D].
Tensor repeat_kv_tokens_first(const Tensor& x, int64_t groups);

}  // namespace tensorplay::nn
