// Hugging Face model folders for nn::Llama: config.json plus safetensors weights under the names
// and layouts of transformers' LlamaForCausalLM (and Qwen2's, Qwen3's and Mistral's, of the same
// shape), so a model moves between tensorplay and transformers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorplay/core/state_dict.h"
#include "tensorplay/nn/hf/hf_tensor_map.h"
#include "tensorplay/nn/llama.h"

namespace tensorplay::nn {

/// LlamaConfig from the text of a `config.json` of model_type "llama", "qwen2", "qwen3" or
/// "mistral" (absent: "llama"), fields absent taken from that family's transformers defaults:
/// vocab_size, max_position_embeddings (context_length), num_hidden_layers, num_attention_heads,
/// num_key_value_heads (default num_attention_heads; Mistral's 8), hidden_size (width),
/// intermediate_size (mlp_width), head_dim (Qwen3's default 128), rms_norm_eps, attention_bias
/// (Llama, Qwen3; Qwen2 always has q, k and v biases), Mistral's sliding_window, the rotary
/// fields (rope_theta top-level with rope_scaling, as transformers 4 writes them, or
/// rope_parameters, as transformers 5 does; types "default", "linear", "dynamic", "llama3" and
/// "yarn") and tie_word_embeddings. Under "dynamic" the context is max_position_embeddings times
/// the factor (max_position_embeddings being the original context, past which it scales). Throws
/// std::invalid_argument naming `source` and the field for what tensorplay cannot compute:
/// another model_type, hidden_act other than "silu", mlp_bias true, an odd head size, another
/// rope type (such as "longrope"), a partial_rotary_factor, Qwen's per-layer sliding windows
/// (use_sliding_window), a size that is not a positive integer, or text that is not a JSON
/// object.
LlamaConfig llama_config_from_json(const std::string& json_text,
                                   const std::string& source = "config.json");

/// The `config.json` text of a LlamaForCausalLM (Qwen2ForCausalLM, Qwen3ForCausalLM or
/// MistralForCausalLM by config.model_type) of `config` with weights of `dtype`, readable by
/// transformers 4 and 5 (rope_theta top-level with rope_scaling, and rope_parameters; no bos/eos
/// token ids: those belong to the tokenizer).
std::string llama_config_to_json(const LlamaConfig& config, DType dtype = DType::Float32);

/// The model's tensors under LlamaForCausalLM's names: tensorplay's names with `model.` in front
/// (`model.embed_tokens.weight`, `model.layers.N.self_attn.q_proj.weight`, its `.bias` with
/// qkv_bias, `model.layers.N.self_attn.q_norm.weight` with qk_norm, ..., `model.norm.weight`),
/// the same in all four families, and `lm_head.weight` only when the head is untied (transformers
/// omits a tied one). Every layout is the same in both libraries, q_proj and k_proj included:
/// tensorplay's RotaryEmbedding turns channel c with channel c + head_dim / 2 ("rotate half"), as
/// transformers does, so no permutation of the query and key rows is needed. (Meta's original
/// checkpoints pair channels 2c and 2c + 1 instead; transformers' conversion script permutes their
/// q and k rows into the rotate-half layout, and folders in transformers' layout are what this
/// reads.) The tensors share storage with the model.
StateDict to_llama_state_dict(const LlamaImpl& model);
/// The same mapping for tensors under tensorplay's Llama names for a model of `config`, such as
/// gradients by parameter name (a tied head appearing once, as `embed_tokens.weight`), or one
/// pipeline stage's tensors with `partial` (then only the tensors present are mapped). Throws
/// std::invalid_argument naming a missing tensor unless `partial`.
StateDict to_llama_state_dict(const StateDict& tensors, const LlamaConfig& config,
                              bool partial = false);

/// LlamaForCausalLM's tensor names for a model of `config`, in order (no lm_head.weight when tied).
std::vector<std::string> llama_tensor_names(const LlamaConfig& config);

/// Each tensor of a model of `config`, in order, under both libraries' names (none transposed;
/// no lm_head.weight when tied).
std::vector<HfTensorName> llama_tensor_map(const LlamaConfig& config);

/// The inverse for a model of `config`: LlamaForCausalLM's names (or LlamaModel's, without
/// `model.`) to tensorplay's. Rotary inverse-frequency buffers older transformers saved
/// (`...rotary_emb.inv_freq`) are skipped, and so is `lm_head.weight` when the head is tied.
/// Throws std::invalid_argument naming every missing tensor, a tensor whose shape differs from
/// what `config` needs, or one that Llama does not have; with `partial`, missing tensors are
/// allowed (a pipeline stage's part).
StateDict from_llama_state_dict(const StateDict& hf, const LlamaConfig& config,
                                bool partial = false);

/// Writes `folder` (created if missing) as transformers' save_pretrained does: `config.json` and
/// `model.safetensors` (or shards of at most `max_shard_bytes` with
/// `model.safetensors.index.json`), in the model's dtype, metadata {"format": "pt"}.
void save_pretrained(const LlamaImpl& model, const std::string& folder,
                     uint64_t max_shard_bytes = uint64_t{5} << 30);
inline void save_pretrained(const Llama& model, const std::string& folder,
                            uint64_t max_shard_bytes = uint64_t{5} << 30) {
  save_pretrained(*model, folder, max_shard_bytes);
}

/// The LlamaConfig of `folder`'s config.json; throws naming the folder when it has none.
LlamaConfig read_llama_config(const std::string& folder);

/// A Llama built from `folder`'s config.json with its weights loaded (float32, bfloat16 or
/// float16 files), its parameters converted to `dtype`, in eval mode as transformers'
/// from_pretrained returns it. Throws naming the folder and the file when config.json or the
/// weights are missing or do not map (see above).
Llama llama_from_pretrained(const std::string& folder, DType dtype = DType::Float32);

/// Loads `folder`'s weights into an existing `model` (keeping its device and dtype); throws
/// std::invalid_argument when the folder's config differs from the model's.
void load_pretrained(LlamaImpl& model, const std::string& folder);
inline void load_pretrained(const Llama& model, const std::string& folder) {
  load_pretrained(*model, folder);
}

}  // namespace tensorplay::nn
