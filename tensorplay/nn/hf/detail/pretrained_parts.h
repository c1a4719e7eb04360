// The model-neutral core of a Hugging Face folder written and read by pipeline stages in
// parallel: one shard per stage, the index and config.json at the end, each stage's tensors back.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tensorplay/nn/hf/hf_tensor_map.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::nn::detail {

/// What the parts need to know of a model family and configuration.
struct PartsModel {
  std::string family;                 ///< "Llama", "GPT" (messages: "a Llama with ...")
  std::string description;            ///< the configuration, as describe() writes it
  std::vector<HfTensorName> tensors;  ///< every tensor in the folder (a tied head is not one)
  bool tied = false;                  ///< the head's weight is the embedding
  std::string embedding;              ///< tensorplay's name of the embedding weight
  std::string head = "lm_head";       ///< the head module; its "weight" may be tied
  std::string first_block_tensor;     ///< held only by the stage that runs the first block
  std::function<std::string(DType)> config_json;  ///< config.json's text for weights of a dtype
  /// The folder's configuration described when it differs from this one, nullopt when equal;
  /// throws naming the folder when it has no readable config.json.
  std::function<std::optional<std::string>(const std::string& folder)> config_differs;
};

/// Writes `stage`'s tensors as shard `part` of `parts`; see llama_pretrained_parts.h.
void save_part(const Module& stage, const PartsModel& model, const std::string& folder, int part,
               int parts);

/// Writes the index and config.json once every part is written; see llama_pretrained_parts.h.
void finish_parts(const std::string& folder, const PartsModel& model, DType dtype, int parts);

/// Loads `stage`'s own tensors from a folder of `model`; see llama_pretrained_parts.h.
void load_part(Module& stage, const PartsModel& model, const std::string& folder);

}  // namespace tensorplay::nn::detail
