// A Llama folder in transformers' layout written and read by pipeline stages in parallel: each
// stage writes its own tensors as one shard and reads only its own tensors back.
#pragma once

#include <string>

#include "tensorplay/nn/llama.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// Writes the tensors of `stage` (one pipeline stage's module, whose state_dict names are the
/// Llama's, as pipeline() makes them) under LlamaForCausalLM's names as shard `part` of `parts`:
/// `folder`/model-0000{part+1}-of-0000{parts}.safetensors (folder created if missing; written to
/// a temporary name, then renamed). With a tied head, the embedding, held by the first stage and
/// the last, is written by the first only (a stage running lm_head is the last unless it also
/// holds layers.0), so that no tensor is in two shards. Throws std::invalid_argument
/// for part outside [0, parts) or a tensor that is not the Llama's; std::runtime_error naming
/// the file on I/O failure.
void save_pretrained_part(const Module& stage, const LlamaConfig& config, const std::string& folder,
                          int part, int parts);

/// Once every part is written (after the ranks' barrier), by one process: writes
/// `model.safetensors.index.json` mapping each tensor to its shard and `config.json` (weights of
/// `dtype`), and removes a stale `model.safetensors`, making `folder` what transformers'
/// save_pretrained writes for a sharded model. Throws std::runtime_error naming a missing shard,
/// std::invalid_argument naming a tensor in two shards or a tensor of the model in none.
void finish_pretrained_parts(const std::string& folder, const LlamaConfig& config, DType dtype,
                             int parts);

/// Loads into `stage` its own tensors from a Llama folder (a single file, or shards through the
/// index, opening only the shards that hold them). The folder's config must equal `config`.
/// Throws std::invalid_argument naming the config difference or the stage's tensors the folder
/// lacks.
void load_pretrained_part(Module& stage, const LlamaConfig& config, const std::string& folder);

}  // namespace tensorplay::nn
