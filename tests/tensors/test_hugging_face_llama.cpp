// Tests for nn/hugging_face_llama.h: Llama config.json both ways (transformers 4's and 5's rope
// fields) and the configs that cannot map, the name mapping of LlamaForCausalLM (tied head
// omitted, every layout shared), folders saved and loaded back to the same logits (sharded,
// bfloat16), and weights that do not fit named. The comparison with transformers itself is
// check_llama_transformers.py (CTest: tensors_llama_folders_match_transformers).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "temp_path.h"
#include "tensorplay/nn/hf/hugging_face_llama.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;
namespace fs = std::filesystem;

namespace {

// config.json as transformers 4.45 writes it for a Llama 3.2-shaped model, shrunk.
const char* kTransformers4Config = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "head_dim": 8,
  "hidden_act": "silu",
  "hidden_size": 32,
  "initializer_range": 0.02,
  "intermediate_size": 80,
  "max_position_embeddings": 64,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 4,
  "num_hidden_layers": 3,
  "num_key_value_heads": 2,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0",
  "use_cache": true,
  "vocab_size": 100
})";

std::string with(const std::string& key, const nlohmann::json& value) {
  nlohmann::json j = nlohmann::json::parse(kTransformers4Config);
  if (value.is_discarded())
    j.erase(key);
  else
    j[key] = value;
  return j.dump();
}

nn::LlamaConfig small_config(bool tied) {
  return {.vocab_size = 23,
          .context_length = 12,
          .n_layer = 2,
          .n_head = 4,
          .n_kv_head = 2,
          .width = 16,
          .mlp_width = 24,
          .rope_theta = 1000.0f,
          .norm_eps = 1e-5f,
          .tie_weights = tied};
}

// A Llama whose norms are not at their initial 1, so that a mapping mistake shows in the logits.
nn::Llama perturbed_llama(const nn::LlamaConfig& config, uint64_t seed) {
  tp::manual_seed(seed);
  nn::Llama model(config);
  tp::NoGradGuard no_grad;
  for (auto& [name, p] : model->named_parameters()) p.copy_(p + tp::randn(p.shape()) * 0.1f);
  return model;
}

tp::Tensor tokens(int64_t batch, int64_t time, int64_t vocab) {
  std::vector<float> ids;
  for (int64_t i = 0; i < batch * time; ++i) ids.push_back(static_cast<float>((i * 7 + 3) % vocab));
  return tp::from_vector(ids, {batch, time});
}

}  // namespace

TEST_CASE("Llama config.json maps to a LlamaConfig", "[hugging_face_llama]") {
  nn::LlamaConfig c = nn::llama_config_from_json(kTransformers4Config);
  CHECK(c == nn::LlamaConfig{.vocab_size = 100,
                             .context_length = 64,
                             .n_layer = 3,
                             .n_head = 4,
                             .n_kv_head = 2,
                             .width = 32,
                             .mlp_width = 80,
                             .rope_theta = 500000.0f,
                             .norm_eps = 1e-5f,
                             .tie_weights = true});
  // transformers 5 moves rope_theta into rope_parameters.
  nlohmann::json v5 = nlohmann::json::parse(with("rope_theta", nlohmann::json::value_t::discarded));
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 250000.0}};
  CHECK(nn::llama_config_from_json(v5.dump()).rope_theta == 250000.0f);
  // transformers' defaults for absent fields; num_key_value_heads defaults to the heads.
  nn::LlamaConfig defaults = nn::llama_config_from_json(R"({"model_type": "llama"})");
  CHECK(defaults.width == 4096);
  CHECK(defaults.n_kv_head == 32);
  CHECK(defaults.rope_theta == 10000.0f);
  CHECK(defaults.norm_eps == 1e-6f);
  CHECK_FALSE(defaults.tie_weights);
  // Our own config.json reads back as the same config.
  for (bool tied : {true, false}) {
    const std::string text = nn::llama_config_to_json(small_config(tied), tp::DType::BFloat16);
    CHECK(nn::llama_config_from_json(text) == small_config(tied));
    nlohmann::json j = nlohmann::json::parse(text);
    CHECK(j["architectures"] == nlohmann::json::array({"LlamaForCausalLM"}));
    CHECK(j["dtype"] == "bfloat16");
    CHECK(j["rope_theta"] == 1000.0);
    CHECK(j["rope_parameters"]["rope_theta"] == 1000.0);
    CHECK(j["rms_norm_eps"] == 1e-5);
  }
}

TEST_CASE("a Llama config that tensorplay's Llama cannot compute is a clear error",
          "[hugging_face_llama]") {
  auto refused = [](const std::string& text, const std::string& what) {
    INFO(text);
    CHECK_THROWS_WITH(nn::llama_config_from_json(text, "some/config.json"),
                      Catch::Contains("some/config.json") && Catch::Contains(what));
  };
  refused(with("model_type", "gemma"), "model_type is \"gemma\"");
  refused(with("hidden_act", "gelu"), "hidden_act is \"gelu\"");
  refused(with("mlp_bias", true), "mlp_bias is true");
  refused(with("head_dim", 7), "head_dim is 7");
  refused(with("num_key_value_heads", 3), "num_key_value_heads (3) does not divide");
  refused(with("rope_scaling", {{"rope_type", "llama3"}, {"factor", 32.0}}),
          "no original_max_position_embeddings");
  refused(with("rope_scaling", {{"rope_type", "longrope"}, {"factor", 32.0}}),
          "rope type \"longrope\"");
  refused(with("hidden_size", -4), "hidden_size is -4, not a positive integer");
  refused(with("rms_norm_eps", "small"), "rms_norm_eps is \"small\", not a number");
  refused("[1, 2]", "not a JSON object");
  refused("{", "not valid JSON");
}

TEST_CASE("Llama tensors map to LlamaForCausalLM's names", "[hugging_face_llama]") {
  for (bool tied : {true, false}) {
    INFO("tied " << tied);
    nn::Llama model = perturbed_llama(small_config(tied), 3);
    tp::StateDict hf = nn::to_llama_state_dict(*model);
    CHECK(hf.keys() == nn::llama_tensor_names(small_config(tied)));
    CHECK(hf.size() == 1 + 2 * 9 + 1 + (tied ? 0 : 1));
    CHECK(hf.at("model.layers.1.self_attn.q_proj.weight")
              .shares_storage(model->find_tensor("layers.1.self_attn.q_proj.weight")));
    CHECK(hf.at("model.layers.0.self_attn.k_proj.weight").shape() == tp::Shape{8, 16});
    CHECK(hf.at("model.layers.0.mlp.down_proj.weight").shape() == tp::Shape{16, 24});
    CHECK(hf.contains("model.norm.weight"));
    CHECK(hf.contains("lm_head.weight") == !tied);
    // And back, a tied head written out again.
    tp::StateDict ours = nn::from_llama_state_dict(hf, small_config(tied));
    CHECK(ours.keys() == model->state_dict().keys());
  }
  // Gradients by parameter name (a tied head listed once) map the same way.
  nn::Llama model = perturbed_llama(small_config(true), 4);
  tp::Tensor loss = tp::sum(model(tokens(1, 5, 23)));
  loss.backward();
  tp::StateDict grads;
  for (const auto& [name, p] : model->named_parameters()) grads.insert(name, p.grad());
  tp::StateDict hf = nn::to_llama_state_dict(grads, model->config());
  CHECK(hf.size() == 20);
  CHECK(hf.at("model.embed_tokens.weight").is_same(model->embed_tokens->weight.grad()));
}

TEST_CASE("Llama weights that do not fit the config are named", "[hugging_face_llama]") {
  nn::Llama model = perturbed_llama(small_config(false), 5);
  tp::StateDict hf = nn::to_llama_state_dict(*model);
  tp::StateDict broken;
  for (const auto& [name, t] : hf) {
    if (name == "model.layers.1.mlp.up_proj.weight") continue;
    broken.insert(name, name == "model.norm.weight" ? tp::ones({15}) : t);
  }
  broken.insert("model.layers.0.self_attn.rotary_emb.inv_freq", tp::ones({2}));  // skipped
  broken.insert("model.layers.0.self_attn.q_norm.weight", tp::ones({4}));
  CHECK_THROWS_WITH(
      nn::from_llama_state_dict(broken, small_config(false)),
      Catch::Contains("missing model.layers.1.mlp.up_proj.weight") &&
          Catch::Contains("model.norm.weight is [15], expected [16]") &&
          Catch::Contains("not part of Llama: model.layers.0.self_attn.q_norm.weight") &&
          !Catch::Contains("inv_freq"));
  // LlamaModel's names, without "model.", load as well; a partial set loads with `partial`.
  tp::StateDict bare, part;
  for (const auto& [name, t] : hf)
    if (name != "lm_head.weight") bare.insert(name.substr(6), t);
  bare.insert("lm_head.weight", hf.at("lm_head.weight"));
  CHECK(nn::from_llama_state_dict(bare, small_config(false)).size() == hf.size());
  part.insert("model.norm.weight", hf.at("model.norm.weight"));
  CHECK(nn::from_llama_state_dict(part, small_config(false), true).keys() ==
        std::vector<std::string>{"norm.weight"});
}

TEST_CASE("Llama folders save and load back to the same logits", "[hugging_face_llama]") {
  for (bool tied : {true, false}) {
    INFO("tied " << tied);
    nn::Llama model = perturbed_llama(small_config(tied), 6);
    const std::string folder = test_files::temp_path("llama_folder");
    nn::save_pretrained(model, folder);
    CHECK(fs::exists(fs::path(folder) / "config.json"));
    CHECK(fs::exists(fs::path(folder) / "model.safetensors"));
    nn::Llama loaded = nn::llama_from_pretrained(folder);
    CHECK(loaded->config() == model->config());
    const tp::Tensor x = tokens(2, 11, 23);
    CHECK(loaded(x).to_vector() == model(x).to_vector());
    if (tied) CHECK(loaded->lm_head->weight.is_same(loaded->embed_tokens->weight));

    // Into an existing model; sharded folders too.
    nn::Llama other = perturbed_llama(small_config(tied), 7);
    nn::save_pretrained(model, folder, 2048);
    CHECK(fs::exists(fs::path(folder) / "model.safetensors.index.json"));
    CHECK_FALSE(fs::exists(fs::path(folder) / "model.safetensors"));
    nn::load_pretrained(other, folder);
    CHECK(other(x).to_vector() == model(x).to_vector());
    fs::remove_all(folder);
  }
}

TEST_CASE("Llama folders keep bfloat16 weights and refuse what does not fit",
          "[hugging_face_llama]") {
  nn::Llama model = perturbed_llama(small_config(true), 8);
  model->to(tp::DType::BFloat16);
  const std::string folder = test_files::temp_path("llama_bf16");
  CHECK_THROWS_WITH(nn::llama_from_pretrained(folder), Catch::Contains("has no config.json"));
  nn::save_pretrained(model, folder);
  tp::StateDict stored = tp::load_safetensors_folder(folder);
  CHECK(stored.at("model.layers.0.self_attn.q_proj.weight").dtype() == tp::DType::BFloat16);
  nn::Llama as_bf16 = nn::llama_from_pretrained(folder, tp::DType::BFloat16);
  CHECK(as_bf16->embed_tokens->weight.dtype() == tp::DType::BFloat16);
  nn::Llama as_f32 = nn::llama_from_pretrained(folder);
  CHECK(as_f32->embed_tokens->weight.to_vector() == model->embed_tokens->weight.to_vector());

  nn::LlamaConfig fewer_kv = small_config(true);
  fewer_kv.n_kv_head = 1;
  nn::Llama other(fewer_kv);
  CHECK_THROWS_WITH(nn::load_pretrained(other, folder), Catch::Contains("holds a Llama with") &&
                                                            Catch::Contains("n_kv_head=2") &&
                                                            Catch::Contains("n_kv_head=1"));
  fs::remove(fs::path(folder) / "model.safetensors");
  CHECK_THROWS_WITH(nn::llama_from_pretrained(folder), Catch::Contains("holds neither"));
  fs::remove_all(folder);
}
