// GPT: a GPT-2 style decoder-only language model (token and position embeddings, a stack of
// pre-norm transformer blocks, a final LayerNorm and a language-model head), laid out with
// nanoGPT's names so a split spec can name `blocks.2` and checkpoints read like GPT-2's.
#pragma once

#include <cstdint>

#include "tensorplay/nn/dropout.h"
#include "tensorplay/nn/embedding.h"
#include "tensorplay/nn/layer_norm.h"
#include "tensorplay/nn/linear.h"
#include "tensorplay/nn/module.h"
#include "tensorplay/nn/module_list.h"

namespace tensorplay::nn {

/// Sizes of a GPT.
struct GPTConfig {
  int64_t vocab_size = 0;
  int64_t context_length = 0;  // longest sequence forward accepts
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t width = 0;        // embedding size; n_head must divide it
  float dropout = 0.0f;     // after the embeddings, attention output and MLP output
  bool tie_weights = true;  // lm_head.weight is wte.weight
};

/// idx [B, T] (float32 token ids, T <= context_length) -> logits [B, T, vocab_size].
///
/// Children, in order: `wte` Embedding(vocab, width), `wpe` Embedding(context, width), `drop`
/// Dropout, `blocks` ModuleList of n_layer TransformerBlock, `ln_f` LayerNorm, `lm_head`
/// Linear(width, vocab, no bias).
///
/// Positions: a non-persistent buffer `pos` holds 0..context_length-1; forward embeds its first
/// T entries with `wpe` and adds them to every sequence of the batch. Being non-persistent, it is
/// listed by named_buffers (and moves with `to`) but is not part of state_dict.
///
/// Tied weights (tie_weights): lm_head's "weight" is registered as the very tensor of wte's
/// "weight". As in PyTorch, named_parameters()/parameters() list it once, as "wte.weight" (so an
/// optimizer updates it once, with the sum of both gradients), while state_dict() holds it under
/// both "wte.weight" and "lm_head.weight" (loading writes the same tensor twice).
///
/// Initialisation (GPT-2): every Linear and Embedding weight from N(0, 0.02), the residual
/// projections (`attn.c_proj.weight`, `mlp.c_proj.weight`) from N(0, 0.02 / sqrt(2 n_layer)),
/// biases 0, LayerNorm weights 1. Values are drawn from the default generator
/// (tensorplay/core/random.h; seed it with manual_seed) parameter by parameter in named_parameters
/// order, after the children's own constructors have drawn theirs.
class GPTImpl : public Module {
 public:
  /// Throws std::invalid_argument naming a size that is not positive or n_head not dividing width.
  explicit GPTImpl(GPTConfig config);
  Tensor forward(const Tensor& idx) override;
  std::string type_name() const override { return "GPT"; }
  std::string extra_repr() const override;
  const GPTConfig& config() const { return config_; }

  Embedding wte{nullptr};
  Embedding wpe{nullptr};
  Dropout drop{nullptr};
  ModuleList blocks{nullptr};
  LayerNorm ln_f{nullptr};
  Linear lm_head{nullptr};
  Tensor pos;  // buffer: 0, 1, ..., context_length - 1

 private:
  void init_weights();
  GPTConfig config_;
};
TENSORPLAY_MODULE(GPT);

}  // namespace tensorplay::nn
