// CausalSelfAttention: GPT-2's multi-head masked self-attention, with one fused projection to
// queries, keys and values (`c_attn`) and an output projection (`c_proj`), as in nanoGPT.
#pragma once

#include "tensorplay/nn/dropout.h"
#include "tensorplay/nn/linear.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// x [B, T, width] -> [B, T, width]. Children: `c_attn` Linear(width, 3 width) whose output
/// holds q, k, v side by side; `c_proj` Linear(width, width); `resid_dropout` Dropout(dropout)
/// on the output. Each of `heads` heads attends over width/heads channels to positions <= its
/// own. (Dropout on the attention probabilities is not applied: the attention op has none.)
class CausalSelfAttentionImpl : public Module {
 public:
  /// Throws std::invalid_argument unless heads divides width.
  CausalSelfAttentionImpl(int64_t width, int64_t heads, float dropout = 0.0f);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "CausalSelfAttention"; }
  std::string extra_repr() const override;

  Linear c_attn{nullptr};
  Linear c_proj{nullptr};
  Dropout resid_dropout{nullptr};
  int64_t width, heads;
};
TENSORPLAY_MODULE(CausalSelfAttention);

}  // namespace tensorplay::nn
