// Pipeline stages' shares of a Llama folder: the Llama's description for the model-neutral parts
// (names, tied embedding, config.json) and the three calls forwarded to them.
#include "tensorplay/nn/hf/llama_pretrained_parts.h"

#include "tensorplay/nn/hf/detail/pretrained_parts.h"
#include "tensorplay/nn/hf/hugging_face_llama.h"

namespace tensorplay::nn {
namespace {

detail::PartsModel parts_model(const LlamaConfig& config) {
  detail::PartsModel m;
  m.family = "Llama";
  m.description = describe(config);
  m.tensors = llama_tensor_map(config);
  m.tied = config.tie_weights;
  m.embedding = "embed_tokens.weight";
  m.first_block_tensor = "layers.0.input_layernorm.weight";
  m.config_json = [config](DType dtype) { return llama_config_to_json(config, dtype); };
  m.config_differs = [config](const std::string& folder) -> std::optional<std::string> {
    const LlamaConfig theirs = read_llama_config(folder);
    if (theirs == config) return std::nullopt;
    return describe(theirs);
  };
  return m;
}

}  // namespace

void save_pretrained_part(const Module& stage, const LlamaConfig& config, const std::string& folder,
                          int part, int parts) {
  detail::save_part(stage, parts_model(config), folder, part, parts);
}

void finish_pretrained_parts(const std::string& folder, const LlamaConfig& config, DType dtype,
                             int parts) {
  detail::finish_parts(folder, parts_model(config), dtype, parts);
}

void load_pretrained_part(Module& stage, const LlamaConfig& config, const std::string& folder) {
  detail::load_part(stage, parts_model(config), folder);
}

}  // namespace tensorplay::nn
