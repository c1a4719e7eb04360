// Llama: a Llama-style decoder-only language model (token embedding, a stack of pre-norm blocks
// with RMSNorm, rotary positions, grouped-query attention and SwiGLU, a final RMSNorm and a
// language-model head), with transformers' LlamaForCausalLM names less the `model.` prefix.
#pragma once

#include <cstdint>

#include "tensorplay/nn/embedding.h"
#include "tensorplay/nn/linear.h"
#include "tensorplay/nn/module.h"
#include "tensorplay/nn/module_list.h"
#include "tensorplay/nn/rms_norm.h"

namespace tensorplay::nn {

/// Sizes of a Llama.
struct LlamaConfig {
  int64_t vocab_size = 0;
  int64_t context_length = 0;  // longest sequence forward accepts (max_position_embeddings)
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;  // key-value heads, dividing n_head; 0 means n_head
  int64_t width = 0;      // hidden size; n_head must divide it into an even head size
  int64_t mlp_width = 0;  // SwiGLU hidden size (intermediate_size)
  float rope_theta = 10000.0f;
  float norm_eps = 1e-6f;
  bool tie_weights = false;  // lm_head.weight is embed_tokens.weight

  bool operator==(const LlamaConfig&) const = default;
};

/// idx [B, T] (float32 token ids, T <= context_length) -> logits [B, T, vocab_size].
///
/// Children, in order: `embed_tokens` Embedding(vocab, width), `layers` ModuleList of n_layer
/// LlamaBlock, `norm` RMSNorm(width, norm_eps), `lm_head` Linear(width, vocab, no bias). A split
/// spec names the blocks `layers.N`; every tensor's name is transformers' without `model.`.
///
/// Tied weights (tie_weights): as GPT's, lm_head's "weight" is embed_tokens' tensor, listed once
/// by named_parameters (as "embed_tokens.weight") and under both names by state_dict.
///
/// Initialisation (transformers' LlamaPreTrainedModel): every Linear and Embedding weight from
/// N(0, 0.02), RMSNorm weights 1, drawn from the default generator parameter by parameter in
/// named_parameters order, after the children's own constructors have drawn theirs.
class LlamaImpl : public Module {
 public:
  /// Throws std::invalid_argument naming a size that is not positive, n_head not dividing width
  /// (into an even head size), n_kv_head not dividing n_head, or rope_theta or norm_eps out of
  /// range.
  explicit LlamaImpl(LlamaConfig config);
  Tensor forward(const Tensor& idx) override;
  std::string type_name() const override { return "Llama"; }
  std::string extra_repr() const override;
  /// The configuration, n_kv_head filled in.
  const LlamaConfig& config() const { return config_; }

  Embedding embed_tokens{nullptr};
  ModuleList layers{nullptr};
  RMSNorm norm{nullptr};
  Linear lm_head{nullptr};

 private:
  void init_weights();
  LlamaConfig config_;
};
TENSORPLAY_MODULE(Llama);

/// "vocab_size=..., context_length=..., ..." for messages.
std::string describe(const LlamaConfig& config);

}  // namespace tensorplay::nn
