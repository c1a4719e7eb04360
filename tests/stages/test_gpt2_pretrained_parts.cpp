// Tests for nn/gpt2_pretrained_parts.h: the stages of a GPT cut by pipeline() write a
// transformers folder in parallel, one shard each, equal tensor by tensor to the whole model's
// save_pretrained; it loads back into a whole model and into stages bit for bit; misuse says why.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models.h"
#include "tensorplay/nn/hf/gpt2_pretrained_parts.h"
#include "tensorplay/nn/hf/hugging_face.h"
#include "tensorplay/nn/llama.h"

using namespace stages_test;
namespace fs = std::filesystem;

namespace {

tp::nn::GPTConfig gpt_parts_config(bool tied) {
  return {.vocab_size = 17,
          .context_length = 8,
          .n_layer = 3,
          .n_head = 2,
          .width = 16,
          .dropout = 0.0f,
          .tie_weights = tied};
}

tp::Tensor token_ids(int64_t b, int64_t t, int64_t vocab) {
  std::vector<float> v;
  for (int64_t i = 0; i < b * t; ++i) v.push_back(static_cast<float>((i * 5 + 2) % vocab));
  return tp::from_vector(v, {b, t});
}

// The GPT cut into `stages` (2: before blocks.2; 3: before blocks.1 and blocks.2).
pp::Pipe gpt_stages(tp::nn::GPT& model, int stages) {
  std::vector<std::pair<std::string, pp::SplitPoint>> split = {
      {"blocks.2", pp::SplitPoint::Beginning}};
  if (stages == 3) split.insert(split.begin(), {"blocks.1", pp::SplitPoint::Beginning});
  pp::PipelineOptions options;
  for (const auto& s : split) options.split_spec[s.first] = s.second;
  return pp::pipeline(model, {token_ids(2, 8, 17)}, options);
}

std::string scratch(const std::string& name) {
  return (fs::temp_directory_path() / ("tp_" + std::to_string(::getpid()) + "_gpt2_" + name))
      .string();
}

std::string part_name(int part, int parts) {
  return "model-0000" + std::to_string(part + 1) + "-of-0000" + std::to_string(parts) +
         ".safetensors";
}

// Equal names, shapes and values, tensor by tensor.
void check_same_tensors(const tp::StateDict& a, const tp::StateDict& b) {
  auto names_a = a.keys(), names_b = b.keys();
  std::sort(names_a.begin(), names_a.end());
  std::sort(names_b.begin(), names_b.end());
  REQUIRE(names_a == names_b);
  for (const std::string& name : names_a) {
    INFO(name);
    CHECK(a.at(name).shape() == b.at(name).shape());
    CHECK(a.at(name).to_vector() == b.at(name).to_vector());
  }
}

void save_parts(pp::Pipe& pipe, const tp::nn::GPTConfig& config, const std::string& folder,
                int parts) {
  for (int s = 0; s < parts; ++s)
    tp::nn::save_pretrained_part(pipe.stage_module(s), config, folder, s, parts);
  tp::nn::finish_pretrained_parts(folder, config, tp::DType::Float32, parts);
}

}  // namespace

TEST_CASE("GPT stages write one shard each, together the whole model's folder",
          "[gpt2][pretrained_parts]") {
  for (int parts : {2, 3})
    for (bool tied : {true, false}) {
      DYNAMIC_SECTION(parts << " stages, " << (tied ? "tied" : "untied") << " head") {
        tp::manual_seed(81 + parts);
        tp::nn::GPT model(gpt_parts_config(tied));
        pp::Pipe pipe = gpt_stages(model, parts);
        const std::string folder = scratch("parts"), whole = scratch("whole");
        fs::remove_all(folder);
        fs::remove_all(whole);
        save_parts(pipe, model->config(), folder, parts);
        tp::nn::save_pretrained(model, whole);
        check_same_tensors(tp::load_safetensors_folder(folder), tp::load_safetensors_folder(whole));

        // The tied embedding is in the first shard only; the head, untied, in the last.
        const auto first = tp::load_safetensors((fs::path(folder) / part_name(0, parts)).string());
        const auto last =
            tp::load_safetensors((fs::path(folder) / part_name(parts - 1, parts)).string());
        CHECK(first.contains("transformer.wte.weight"));
        CHECK_FALSE(last.contains("transformer.wte.weight"));
        CHECK(last.contains("lm_head.weight") == !tied);
        CHECK(last.at("transformer.h.2.attn.c_attn.weight").shape() == tp::Shape{16, 48});
        std::ifstream index(fs::path(folder) / "model.safetensors.index.json");
        const nlohmann::json j = nlohmann::json::parse(index);
        CHECK(j["weight_map"]["transformer.ln_f.bias"] == part_name(parts - 1, parts));
        CHECK(tp::nn::read_gpt2_config(folder).tie_weights == tied);

        tp::nn::GPT loaded(gpt_parts_config(tied));  // other weights
        tp::nn::load_pretrained(loaded, folder);
        check_same_tensors(loaded->state_dict(), model->state_dict());
        const tp::Tensor x = token_ids(2, 7, 17);
        CHECK(loaded(x).to_vector() == model(x).to_vector());
        fs::remove_all(folder);
        fs::remove_all(whole);
      }
    }
}

TEST_CASE("GPT stages each load their own tensors bit for bit", "[gpt2][pretrained_parts]") {
  for (int parts : {2, 3})
    for (bool sharded_by_stage : {false, true}) {
      DYNAMIC_SECTION(parts << " stages from " << (sharded_by_stage ? "their parts" : "one file")) {
        tp::manual_seed(91 + parts);
        tp::nn::GPT source(gpt_parts_config(true));
        const std::string folder = scratch("load");
        fs::remove_all(folder);
        if (sharded_by_stage) {
          pp::Pipe source_pipe = gpt_stages(source, parts);
          save_parts(source_pipe, source->config(), folder, parts);
        } else {
          tp::nn::save_pretrained(source, folder);
        }
        tp::nn::GPT model(gpt_parts_config(true));  // other weights
        pp::Pipe pipe = gpt_stages(model, parts);
        const tp::StateDict expected = source->state_dict();
        for (int s = 0; s < parts; ++s) {
          tp::nn::load_pretrained_part(pipe.stage_module(s), model->config(), folder);
          for (const auto& [name, tensor] : pipe.stage_module(s).state_dict()) {
            INFO("stage " << s << ": " << name);
            CHECK(tensor.to_vector() == expected.at(name).to_vector());
          }
        }
        const tp::Tensor x = token_ids(2, 8, 17);
        CHECK(pipe.forward({x})[0].to_vector() == source(x).to_vector());
        fs::remove_all(folder);
      }
    }
}

TEST_CASE("GPT parts that cannot be saved, finished or loaded say why",
          "[gpt2][pretrained_parts]") {
  tp::manual_seed(95);
  tp::nn::GPT model(gpt_parts_config(false));
  const tp::nn::GPTConfig& config = model->config();
  pp::Pipe pipe = gpt_stages(model, 3);
  const std::string folder = scratch("bad");
  fs::remove_all(folder);
  CHECK_THROWS_WITH(tp::nn::save_pretrained_part(pipe.stage_module(0), config, folder, 3, 3),
                    Catch::Contains("part 3 is not in [0, 3)"));
  CHECK_THROWS_WITH(tp::nn::save_pretrained_part(pipe.stage_module(0), config, folder, -1, 3),
                    Catch::Contains("part -1 is not in [0, 3)"));

  tp::nn::save_pretrained_part(pipe.stage_module(0), config, folder, 0, 3);
  tp::nn::save_pretrained_part(pipe.stage_module(2), config, folder, 2, 3);
  CHECK_THROWS_WITH(tp::nn::finish_pretrained_parts(folder, config, tp::DType::Float32, 3),
                    Catch::Contains("model-00002-of-00003.safetensors is missing"));

  tp::nn::save_pretrained_part(pipe.stage_module(0), config, folder, 1, 3);  // stage 0 twice
  CHECK_THROWS_WITH(tp::nn::finish_pretrained_parts(folder, config, tp::DType::Float32, 3),
                    Catch::Contains("finish_pretrained_parts: transformer.") &&
                        Catch::Contains(" is in both "
                                        "model-00001-of-00003.safetensors and "
                                        "model-00002-of-00003.safetensors"));
  tp::nn::save_pretrained_part(pipe.stage_module(0), config, folder, 0, 2);
  CHECK_THROWS_WITH(tp::nn::finish_pretrained_parts(folder, config, tp::DType::Float32, 1),
                    Catch::Contains("model-00001-of-00001.safetensors is missing"));

  // Parts 1 and 2 of 2 leave blocks.1 in none: named.
  fs::remove_all(folder);
  tp::nn::save_pretrained_part(pipe.stage_module(0), config, folder, 0, 2);
  tp::nn::save_pretrained_part(pipe.stage_module(2), config, folder, 1, 2);
  CHECK_THROWS_WITH(tp::nn::finish_pretrained_parts(folder, config, tp::DType::Float32, 2),
                    Catch::Contains("no part holds transformer.h.1.ln_1.weight"));

  // A stage of another model is not the GPT's.
  tp::nn::Llama llama(tp::nn::LlamaConfig{.vocab_size = 17,
                                          .context_length = 8,
                                          .n_layer = 1,
                                          .n_head = 2,
                                          .width = 16,
                                          .mlp_width = 20});
  CHECK_THROWS_WITH(tp::nn::save_pretrained_part(*llama, config, folder, 0, 2),
                    Catch::Contains("the stage holds tensors a GPT with") &&
                        Catch::Contains("does not have: embed_tokens.weight"));

  // Another configuration, and a folder without the stage's tensors.
  fs::remove_all(folder);
  tp::nn::save_pretrained(model, folder);
  tp::nn::GPTConfig other = gpt_parts_config(false);
  other.width = 32;
  CHECK_THROWS_WITH(tp::nn::load_pretrained_part(pipe.stage_module(1), other, folder),
                    Catch::Contains("holds a GPT with") && Catch::Contains("width=16") &&
                        Catch::Contains("the stage is of one with") && Catch::Contains("width=32"));
  tp::StateDict without = tp::load_safetensors_folder(folder);
  tp::StateDict kept;
  for (const auto& [name, tensor] : without)
    if (name.find(".h.1.") == std::string::npos) kept.insert(name, tensor);
  tp::save_safetensors(kept, (fs::path(folder) / "model.safetensors").string());
  CHECK_THROWS_WITH(tp::nn::load_pretrained_part(pipe.stage_module(1), config, folder),
                    Catch::Contains("has no transformer.h.1.") &&
                        Catch::Contains("for this stage (and 11 more)"));
  tp::nn::load_pretrained_part(pipe.stage_module(0), config, folder);  // its tensors are there
  fs::remove_all(folder);
}
