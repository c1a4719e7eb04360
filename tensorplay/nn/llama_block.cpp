// Pre-norm Llama decoder layer.
#include "tensorplay/nn/llama_block.h"

#include "tensorplay/core/ops/elementwise.h"

namespace tensorplay::nn {

LlamaBlockImpl::LlamaBlockImpl(GroupedQueryAttentionOptions attention, int64_t mlp_width,
                               float norm_eps) {
  input_layernorm = register_module("input_layernorm", RMSNorm(attention.width, norm_eps));
  self_attn = register_module("self_attn", GroupedQueryAttention(attention));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RMSNorm(attention.width, norm_eps));
  mlp = register_module("mlp", SwiGLU(attention.width, mlp_width));
}

Tensor LlamaBlockImpl::forward(const Tensor& x) {
  Tensor h = x + self_attn(input_layernorm(x));
  return h + mlp(post_attention_layernorm(h));
}

}  // namespace tensorplay::nn
