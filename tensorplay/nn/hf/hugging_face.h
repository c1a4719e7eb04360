// Hugging Face model folders for nn::GPT: config.json plus safetensors weights under the names and
// layouts of transformers' GPT2LMHeadModel, so a model moves between tensorplay and transformers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorplay/core/state_dict.h"
#include "tensorplay/nn/gpt.h"
#include "tensorplay/nn/hf/hf_tensor_map.h"

namespace tensorplay::nn {

/// GPTConfig from the text of a GPT-2 `config.json` (`model_type` "gpt2"). Fields transformers'
/// GPT2Config defaults are taken from those defaults when absent. vocab_size, n_positions
/// (context_length), n_embd (width), n_layer, n_head and tie_word_embeddings map one to one;
/// dropout is resid_pdrop (tensorplay's GPT has one rate for the embeddings and residuals, and no
/// dropout on attention probabilities, so embd_pdrop and attn_pdrop are not used).
/// Throws std::invalid_argument naming `source` and the field for what tensorplay's GPT cannot
/// compute: another model_type, an activation other than GELU's tanh form ("gelu_new",
/// "gelu_pytorch_tanh"), n_inner other than 4 n_embd, layer_norm_epsilon other than 1e-5,
/// scale_attn_weights false, scale_attn_by_inverse_layer_idx, add_cross_attention, a size that is
/// not a positive integer, or text that is not a JSON object.
GPTConfig gpt2_config_from_json(const std::string& json_text,
                                const std::string& source = "config.json");

/// The `config.json` text transformers writes for a GPT2LMHeadModel of `config` with weights of
/// `dtype` (attn_pdrop 0, embd_pdrop and resid_pdrop the dropout; no bos/eos token ids: those
/// belong to the tokenizer).
std::string gpt2_config_to_json(const GPTConfig& config, DType dtype = DType::Float32);

/// The model's tensors under GPT2LMHeadModel's names and layouts: `transformer.wte.weight`,
/// `transformer.wpe.weight`, `transformer.h.N.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,
/// mlp.c_proj}.{weight,bias}`, `transformer.ln_f.{weight,bias}`, and `lm_head.weight` only when
/// the head is untied (transformers omits a tied one). c_attn, c_proj, c_fc weights are stored as
/// transformers' Conv1D, [in, out], the transpose of tensorplay's Linear [out, in]; c_attn's
/// output keeps q, k, v side by side, heads contiguous within each, which both libraries share.
/// The transposed tensors are copies; the others share storage with the model.
StateDict to_gpt2_state_dict(const GPTImpl& model);
/// The same mapping for tensors under tensorplay's GPT names for a model of `config`, such as
/// gradients by parameter name (where a tied head appears once, as `wte.weight`); any
/// `lm_head.weight` is left out when the head is tied. Throws std::invalid_argument naming a
/// missing tensor.
StateDict to_gpt2_state_dict(const StateDict& tensors, const GPTConfig& config);

/// Each tensor of a model of `config`, in order, under both libraries' names (GPT2LMHeadModel's,
/// `transformer.` included), the Conv1D weights marked transposed; no lm_head.weight when tied.
std::vector<HfTensorName> gpt2_tensor_map(const GPTConfig& config);

/// "vocab_size=..., context_length=..., n_layer=..., n_head=..., width=..., tie_weights=...": the
/// sizes a GPT-2 folder's weights depend on, for messages and for comparing configurations.
std::string describe(const GPTConfig& config);

/// The inverse of to_gpt2_state_dict for a model of `config`: tensors named as
/// GPT2LMHeadModel's (or GPT2Model's, without the `transformer.` prefix) to tensorplay's GPT
/// names and layouts. Legacy attention-mask buffers (`attn.bias`, `attn.masked_bias`) are
/// skipped, and so is `lm_head.weight` when the head is tied. Throws std::invalid_argument naming
/// every missing tensor, a tensor whose shape differs from what `config` needs, or a tensor
/// GPT-2 does not have.
StateDict from_gpt2_state_dict(const StateDict& hf, const GPTConfig& config);

/// Writes `folder` (created if missing) as transformers' save_pretrained does: `config.json` and
/// `model.safetensors` (or shards of at most `max_shard_bytes` with
/// `model.safetensors.index.json`), in the model's dtype, metadata {"format": "pt"}.
void save_pretrained(const GPTImpl& model, const std::string& folder,
                     uint64_t max_shard_bytes = uint64_t{5} << 30);
inline void save_pretrained(const GPT& model, const std::string& folder,
                            uint64_t max_shard_bytes = uint64_t{5} << 30) {
  save_pretrained(*model, folder, max_shard_bytes);
}

/// The GPTConfig of `folder`'s config.json; throws naming the folder when it has none.
GPTConfig read_gpt2_config(const std::string& folder);

/// A GPT built from `folder`'s config.json with its weights loaded (float32, bfloat16 or float16
/// files), its parameters converted to `dtype`, in eval mode as transformers' from_pretrained
/// returns it (call train() before training: dropout is off until then). Throws naming the folder
/// and the file when config.json or the weights are missing or do not map (see above).
GPT gpt_from_pretrained(const std::string& folder, DType dtype = DType::Float32);

/// Loads `folder`'s weights into an existing `model` (keeping its device and dtype); throws
/// std::invalid_argument when the folder's config differs from the model's in a size or in
/// tying.
void load_pretrained(GPTImpl& model, const std::string& folder);
inline void load_pretrained(const GPT& model, const std::string& folder) {
  load_pretrained(*model, folder);
}

}  // namespace tensorplay::nn
