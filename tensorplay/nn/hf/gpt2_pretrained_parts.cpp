// Pipeline stages' shares of a GPT-2 folder: the GPT's description for the model-neutral parts
// (names, Conv1D transposes, tied embedding, config.json) and the three calls forwarded to them.
#include "tensorplay/nn/hf/gpt2_pretrained_parts.h"

#include "tensorplay/nn/hf/detail/pretrained_parts.h"
#include "tensorplay/nn/hf/hugging_face.h"

namespace tensorplay::nn {
namespace {

detail::PartsModel parts_model(const GPTConfig& config) {
  detail::PartsModel m;
  m.family = "GPT";
  m.description = describe(config);
  m.tensors = gpt2_tensor_map(config);
  m.tied = config.tie_weights;
  m.embedding = "wte.weight";
  m.first_block_tensor = "blocks.0.ln_1.weight";
  m.config_json = [config](DType dtype) { return gpt2_config_to_json(config, dtype); };
  m.config_differs = [config](const std::string& folder) -> std::optional<std::string> {
    const std::string theirs = describe(read_gpt2_config(folder));
    if (theirs == describe(config)) return std::nullopt;
    return theirs;
  };
  return m;
}

}  // namespace

void save_pretrained_part(const Module& stage, const GPTConfig& config, const std::string& folder,
                          int part, int parts) {
  detail::save_part(stage, parts_model(config), folder, part, parts);
}

void finish_pretrained_parts(const std::string& folder, const GPTConfig& config, DType dtype,
                             int parts) {
  detail::finish_parts(folder, parts_model(config), dtype, parts);
}

void load_pretrained_part(Module& stage, const GPTConfig& config, const std::string& folder) {
  detail::load_part(stage, parts_model(config), folder);
}

}  // namespace tensorplay::nn
