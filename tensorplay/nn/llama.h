// Llama: a Llama-style decoder-only language model (token embedding, a stack of pre-norm blocks
// with RMSNorm, rotary positions, grouped-query attention and SwiGLU, a final RMSNorm and a
// language-model head), with transformers' LlamaForCausalLM names less the `model.` prefix.
#pragma once

#include <cstdint>
#include <string>

#include "tensorplay/nn/embedding.h"
#include "tensorplay/nn/linear.h"
#include "tensorplay/nn/module.h"
#include "tensorplay/nn/module_list.h"
#include "tensorplay/nn/rms_norm.h"
#include "tensorplay/nn/rotary.h"

namespace tensorplay::nn {

/// Sizes of a Llama, and the flags by which the families of the same shape differ from it
/// (Qwen2: qkv_bias; Qwen3: head_dim and qk_norm; Mistral: sliding_window).
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
  bool tie_weights = false;    // lm_head.weight is embed_tokens.weight
  int64_t head_dim = 0;        // channels per head (even); 0 means width / n_head
  bool qkv_bias = false;       // q_proj, k_proj and v_proj with a bias (Qwen2)
  bool o_bias = false;         // o_proj with a bias (with qkv_bias: Llama's attention_bias)
  bool qk_norm = false;        // RMSNorm of each query and key head (Qwen3's q_norm, k_norm)
  int64_t sliding_window = 0;  // Mistral's; 0: none (see GroupedQueryAttentionOptions)
  RotaryScaling rope_scaling;  // rope_scaling / rope_parameters beyond rope_theta
  /// The Hugging Face family the model is saved as: "llama" (LlamaForCausalLM), "qwen2",
  /// "qwen3" or "mistral" (Qwen2ForCausalLM, ...); each constrains the flags above.
  std::string model_type = "llama";

  /// head_dim, or width / n_head when it is 0.
  int64_t head_size() const { return head_dim > 0 ? head_dim : width / n_head; }

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
/// N(0, 0.02), biases 0, RMSNorm weights 1, drawn from the default generator parameter by parameter
/// in named_parameters order, after the children's own constructors have drawn theirs.
class LlamaImpl : public Module {
 public:
  /// Throws std::invalid_argument naming a size that is not positive, n_head not dividing width
  /// (into an even head size) without head_dim, an odd head_dim, n_kv_head not dividing n_head,
  /// rope_theta, norm_eps or rope_scaling out of range, or an unknown model_type.
  explicit LlamaImpl(LlamaConfig config);
  Tensor forward(const Tensor& idx) override;
  std::string type_name() const override { return "Llama"; }
  std::string extra_repr() const override;
  /// The configuration, n_kv_head filled in (and a head_dim equal to width / n_head as 0).
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
