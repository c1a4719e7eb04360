// Tests for nn/llama_pretrained_parts.h: the stages of a Llama cut by pipeline() write a
// transformers folder in parallel, one shard each, that loads as the whole model; and each stage
// reads its own tensors back from a whole-model folder or a sharded one.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models.h"
#include "tensorplay/nn/hf/hugging_face_llama.h"
#include "tensorplay/nn/hf/llama_pretrained_parts.h"

using namespace stages_test;
namespace fs = std::filesystem;

namespace {

tp::nn::LlamaConfig parts_config(bool tied) {
  return {.vocab_size = 17,
          .context_length = 8,
          .n_layer = 3,
          .n_head = 4,
          .n_kv_head = 2,
          .width = 16,
          .mlp_width = 20,
          .tie_weights = tied};
}

tp::Tensor ids(int64_t b, int64_t t, int64_t vocab) {
  std::vector<float> v;
  for (int64_t i = 0; i < b * t; ++i) v.push_back(static_cast<float>((i * 3 + 1) % vocab));
  return tp::from_vector(v, {b, t});
}

pp::Pipe three_stages(tp::nn::Llama& model) {
  return pp::pipeline(model, {ids(2, 8, 17)},
                      {.split_spec = {{"layers.1", pp::SplitPoint::Beginning},
                                      {"layers.2", pp::SplitPoint::Beginning}}});
}

std::string unique_folder(const std::string& name) {
  return (fs::temp_directory_path() / ("tp_" + std::to_string(::getpid()) + "_" + name)).string();
}

}  // namespace

TEST_CASE("Llama stages write one shard each, together a folder of the whole model",
          "[llama][pretrained_parts]") {
  for (bool tied : {true, false}) {
    DYNAMIC_SECTION((tied ? "tied" : "untied") << " head") {
      tp::manual_seed(71);
      tp::nn::Llama model(parts_config(tied));
      pp::Pipe pipe = three_stages(model);
      const std::string folder = unique_folder(tied ? "parts_tied" : "parts_untied");
      fs::remove_all(folder);
      for (int s = 0; s < 3; ++s)
        tp::nn::save_pretrained_part(pipe.stage_module(s), model->config(), folder, s, 3);
      tp::nn::finish_pretrained_parts(folder, model->config(), tp::DType::Float32, 3);

      // Each shard holds its stage's tensors only; the tied embedding is in the first.
      auto names_in = [&](int part) {
        return tp::load_safetensors((fs::path(folder) / ("model-0000" + std::to_string(part + 1) +
                                                         "-of-00003.safetensors"))
                                        .string())
            .keys();
      };
      auto first = names_in(0), last = names_in(2);
      CHECK(std::count(first.begin(), first.end(), "model.embed_tokens.weight") == 1);
      CHECK(std::count(last.begin(), last.end(), "model.embed_tokens.weight") == 0);
      CHECK(std::count(last.begin(), last.end(), "lm_head.weight") == (tied ? 0 : 1));
      CHECK(std::count(last.begin(), last.end(), "model.layers.2.mlp.up_proj.weight") == 1);
      std::ifstream index(fs::path(folder) / "model.safetensors.index.json");
      nlohmann::json j = nlohmann::json::parse(index);
      CHECK(j["weight_map"]["model.norm.weight"] == "model-00003-of-00003.safetensors");

      tp::nn::Llama loaded = tp::nn::llama_from_pretrained(folder);
      tp::Tensor x = ids(2, 7, 17);
      CHECK(loaded(x).to_vector() == model(x).to_vector());
      fs::remove_all(folder);
    }
  }
}

TEST_CASE("Llama stages each load their own tensors from a folder", "[llama][pretrained_parts]") {
  for (bool sharded : {false, true}) {
    DYNAMIC_SECTION((sharded ? "sharded" : "single file") << " folder") {
      tp::manual_seed(72);
      tp::nn::Llama source(parts_config(true));
      const std::string folder = unique_folder(sharded ? "load_sharded" : "load_single");
      tp::nn::save_pretrained(source, folder, sharded ? 3000 : uint64_t{1} << 30);
      tp::nn::Llama model(parts_config(true));  // other weights
      pp::Pipe pipe = three_stages(model);
      for (int s = 0; s < 3; ++s)
        tp::nn::load_pretrained_part(pipe.stage_module(s), model->config(), folder);
      tp::Tensor x = ids(2, 8, 17);
      CHECK(pipe.forward({x})[0].to_vector() == source(x).to_vector());
      fs::remove_all(folder);
    }
  }
}

TEST_CASE("Llama parts that cannot be finished or loaded say why", "[llama][pretrained_parts]") {
  tp::manual_seed(73);
  tp::nn::Llama model(parts_config(false));
  pp::Pipe pipe = three_stages(model);
  const std::string folder = unique_folder("parts_bad");
  fs::remove_all(folder);
  tp::nn::save_pretrained_part(pipe.stage_module(0), model->config(), folder, 0, 3);
  CHECK_THROWS_WITH(tp::nn::finish_pretrained_parts(folder, model->config(), tp::DType::Float32, 3),
                    Catch::Contains("model-00002-of-00003.safetensors is missing"));
  CHECK_THROWS_WITH(
      tp::nn::save_pretrained_part(pipe.stage_module(0), model->config(), folder, 3, 3),
      Catch::Contains("part 3 is not in [0, 3)"));
  tp::nn::save_pretrained(model, folder);
  tp::nn::LlamaConfig other = parts_config(false);
  other.rope_theta = 500.0f;
  CHECK_THROWS_WITH(tp::nn::load_pretrained_part(pipe.stage_module(1), other, folder),
                    Catch::Contains("holds a Llama with"));
  fs::remove_all(folder);
}

TEST_CASE("Qwen2, Qwen3 and Mistral stages write and load their parts of a folder",
          "[llama][pretrained_parts]") {
  for (const char* family : {"qwen2", "qwen3", "mistral"}) {
    DYNAMIC_SECTION(family) {
      tp::nn::LlamaConfig config = parts_config(false);
      config.model_type = family;
      config.qkv_bias = config.model_type == "qwen2";
      config.qk_norm = config.model_type == "qwen3";
      if (config.model_type != "qwen2") config.head_dim = 6;
      if (config.model_type == "mistral") config.sliding_window = 8;
      config.rope_scaling = {.type = "yarn", .factor = 2.0, .original_context_length = 4};
      tp::manual_seed(74);
      tp::nn::Llama model(config);
      pp::Pipe pipe = three_stages(model);
      const std::string folder = unique_folder(std::string("parts_") + family);
      fs::remove_all(folder);
      for (int s = 0; s < 3; ++s)
        tp::nn::save_pretrained_part(pipe.stage_module(s), config, folder, s, 3);
      tp::nn::finish_pretrained_parts(folder, config, tp::DType::Float32, 3);
      tp::nn::Llama loaded = tp::nn::llama_from_pretrained(folder);
      CHECK(loaded->config() == config);
      const tp::Tensor x = ids(2, 8, 17);
      CHECK(loaded(x).to_vector() == model(x).to_vector());

      tp::nn::Llama other(config);  // other weights, loaded stage by stage
      pp::Pipe other_pipe = three_stages(other);
      for (int s = 0; s < 3; ++s)
        tp::nn::load_pretrained_part(other_pipe.stage_module(s), config, folder);
      CHECK(other_pipe.forward({x})[0].to_vector() == model(x).to_vector());
      fs::remove_all(folder);
    }
  }
}
