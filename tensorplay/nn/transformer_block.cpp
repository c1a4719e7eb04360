// Pre-norm transformer block.
#include "tensorplay/nn/transformer_block.h"

#include "tensorplay/core/ops/elementwise.h"

namespace tensorplay::nn {

TransformerBlockImpl::TransformerBlockImpl(int64_t width, int64_t heads, float dropout) {
  ln_1 = register_module("ln_1", LayerNorm(width));
  attn = register_module("attn", CausalSelfAttention(width, heads, dropout));
  ln_2 = register_module("ln_2", LayerNorm(width));
  mlp = register_module("mlp", MLP(width, dropout));
}

Tensor TransformerBlockImpl::forward(const Tensor& x) {
  Tensor h = x + attn(ln_1(x));
  return h + mlp(ln_2(h));
}

}  // namespace tensorplay::nn
