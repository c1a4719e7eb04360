// LlamaBlock: one pre-norm Llama decoder layer (transformers' LlamaDecoderLayer), grouped-query
// attention then a SwiGLU MLP, each in a residual connection around an RMSNorm.
#pragma once

#include "tensorplay/nn/grouped_query_attention.h"
#include "tensorplay/nn/module.h"
#include "tensorplay/nn/rms_norm.h"
#include "tensorplay/nn/swiglu.h"

namespace tensorplay::nn {

/// x [B, T, width] -> h = x + self_attn(input_layernorm(x)), then h + mlp(post_attention_layernorm
/// (h)). Children, in order: `input_layernorm` RMSNorm(width, norm_eps), `self_attn`
/// GroupedQueryAttention(attention), `post_attention_layernorm` RMSNorm(width, norm_eps), `mlp`
/// SwiGLU(width, mlp_width).
class LlamaBlockImpl : public Module {
 public:
  LlamaBlockImpl(GroupedQueryAttentionOptions attention, int64_t mlp_width, float norm_eps);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LlamaBlock"; }

  RMSNorm input_layernorm{nullptr};
  GroupedQueryAttention self_attn{nullptr};
  RMSNorm post_attention_layernorm{nullptr};
  SwiGLU mlp{nullptr};
};
TENSORPLAY_MODULE(LlamaBlock);

}  // namespace tensorplay::nn
