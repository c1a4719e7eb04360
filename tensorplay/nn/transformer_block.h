// TransformerBlock: one pre-norm GPT-2 block, attention then MLP, each wrapped in a residual
// connection around a LayerNorm.
#pragma once

#include "tensorplay/nn/attention.h"
#include "tensorplay/nn/layer_norm.h"
#include "tensorplay/nn/mlp.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// x [B, T, width] -> x + attn(ln_1(x)), then + mlp(ln_2(.)). Children, in order: `ln_1`,
/// `attn` (CausalSelfAttention), `ln_2`, `mlp` (MLP).
class TransformerBlockImpl : public Module {
 public:
  TransformerBlockImpl(int64_t width, int64_t heads, float dropout = 0.0f);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "TransformerBlock"; }

  LayerNorm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  LayerNorm ln_2{nullptr};
  MLP mlp{nullptr};
};
TENSORPLAY_MODULE(TransformerBlock);

}  // namespace tensorplay::nn
