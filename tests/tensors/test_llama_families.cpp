// Tests for the Llama-shaped families and rotary scaling: rotary_frequencies against the
// formulas in double (linear, dynamic NTK, llama3, yarn), the dynamic tables of long sequences, a
// head size apart from the width, attention biases and per-head q/k norms, the sliding window's
// band, and Qwen2, Qwen3 and Mistral config.json files and folders both ways. The comparison
// with transformers itself is check_llama_families_transformers.py (CTest:
// tensors_llama_families_match_transformers).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "temp_path.h"
#include "tensorplay/nn/hf/hugging_face.h"
#include "tensorplay/nn/hf/hugging_face_llama.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;
namespace fs = std::filesystem;

namespace {

std::vector<double> default_inverse(int64_t d, double theta) {
  std::vector<double> out;
  for (int64_t c = 0; c < d / 2; ++c) out.push_back(std::pow(theta, -2.0 * c / d));
  return out;
}

void check_close(const std::vector<float>& ours, const std::vector<double>& reference,
                 double tolerance = 2e-6) {
  REQUIRE(ours.size() == reference.size());
  for (size_t c = 0; c < ours.size(); ++c) {
    INFO("channel " << c);
    CHECK(ours[c] == Approx(reference[c]).epsilon(tolerance));
  }
}

nn::LlamaConfig family_config(const std::string& type) {
  nn::LlamaConfig c{.vocab_size = 29,
                    .context_length = 24,
                    .n_layer = 2,
                    .n_head = 4,
                    .n_kv_head = 2,
                    .width = 16,
                    .mlp_width = 24,
                    .rope_theta = 1000.0f,
                    .norm_eps = 1e-5f};
  c.model_type = type;
  if (type == "qwen2") c.qkv_bias = true;
  if (type == "qwen3") {
    c.qk_norm = true;
    c.head_dim = 6;
  }
  if (type == "mistral") {
    c.head_dim = 10;
    c.sliding_window = 20;
  }
  if (type == "llama")
    c.rope_scaling = {.type = "llama3", .factor = 4.0, .original_context_length = 8};
  return c;
}

nn::Llama perturbed(const nn::LlamaConfig& config, uint64_t seed) {
  tp::manual_seed(seed);
  nn::Llama model(config);
  tp::NoGradGuard no_grad;
  for (auto& [name, p] : model->named_parameters()) p.copy_(p + tp::randn(p.shape()) * 0.1f);
  return model;
}

tp::Tensor tokens(int64_t batch, int64_t time, int64_t vocab) {
  std::vector<float> ids;
  for (int64_t i = 0; i < batch * time; ++i) ids.push_back(static_cast<float>((i * 5 + 2) % vocab));
  return tp::from_vector(ids, {batch, time});
}

}  // namespace

TEST_CASE("rotary_frequencies follows transformers' formulas", "[rotary][llama_families]") {
  const int64_t d = 16;
  const double theta = 10000.0;
  const std::vector<double> plain = default_inverse(d, theta);
  check_close(nn::rotary_frequencies(d, 10000.0f, {}, 64).inverse, plain);

  SECTION("linear divides every frequency by the factor") {
    std::vector<double> reference;
    for (double f : plain) reference.push_back(f / 4.0);
    check_close(nn::rotary_frequencies(d, 10000.0f, {.type = "linear", .factor = 4.0}, 64).inverse,
                reference);
  }
  SECTION("dynamic raises theta past the original context only") {
    const nn::RotaryScaling s{.type = "dynamic", .factor = 2.0, .original_context_length = 16};
    check_close(nn::rotary_frequencies(d, 10000.0f, s, 32, 10).inverse, plain);
    const double base = theta * std::pow(2.0 * 24 / 16 - 1.0, 16.0 / 14.0);
    check_close(nn::rotary_frequencies(d, 10000.0f, s, 32, 24).inverse, default_inverse(d, base));
  }
  SECTION("llama3 keeps high frequencies, divides low ones, blends those between") {
    const nn::RotaryScaling s{.type = "llama3",
                              .factor = 8.0,
                              .original_context_length = 64,
                              .low_freq_factor = 1.0,
                              .high_freq_factor = 4.0};
    std::vector<double> reference;
    for (double f : plain) {
      const double wavelength = 2 * M_PI / f;
      if (wavelength < 64.0 / 4.0) {
        reference.push_back(f);
      } else if (wavelength > 64.0) {
        reference.push_back(f / 8.0);
      } else {
        const double smooth = (64.0 / wavelength - 1.0) / 3.0;
        reference.push_back((1 - smooth) * f / 8.0 + smooth * f);
      }
    }
    check_close(nn::rotary_frequencies(d, 10000.0f, s, 512).inverse, reference);
  }
  SECTION("yarn blends interpolation and extrapolation over beta_fast..beta_slow") {
    const nn::RotaryScaling s{.type = "yarn", .factor = 4.0, .original_context_length = 32};
    const nn::RotaryFrequencies f = nn::rotary_frequencies(d, 10000.0f, s, 128);
    CHECK(f.attention_scaling == Approx(0.1 * std::log(4.0) + 1.0));
    auto correction = [&](double rotations) {
      return d * std::log(32.0 / (rotations * 2 * M_PI)) / (2 * std::log(theta));
    };
    const double low = std::max(std::floor(correction(32.0)), 0.0);
    const double high = std::min(std::ceil(correction(1.0)), d - 1.0);
    std::vector<double> reference;
    for (int64_t c = 0; c < d / 2; ++c) {
      const double ramp = std::clamp((c - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1.0 - ramp;
      reference.push_back(plain[c] / 4.0 * (1 - extrapolation) + plain[c] * extrapolation);
    }
    check_close(f.inverse, reference);
    // An attention factor given is taken as it is; DeepSeek's mscales divide.
    CHECK(nn::rotary_frequencies(d, 10000.0f,
                                 {.type = "yarn", .factor = 4.0, .attention_factor = 1.5}, 128)
              .attention_scaling == 1.5f);
    CHECK(
        nn::rotary_frequencies(
            d, 10000.0f, {.type = "yarn", .factor = 4.0, .mscale = 2.0, .mscale_all_dim = 1.0}, 128)
            .attention_scaling ==
        Approx((0.2 * std::log(4.0) + 1.0) / (0.1 * std::log(4.0) + 1.0)));
  }
  SECTION("bad scalings are named") {
    CHECK_THROWS_WITH(nn::rotary_frequencies(d, 1e4f, {.type = "longrope"}, 8),
                      Catch::Contains("unknown type \"longrope\""));
    CHECK_THROWS_WITH(nn::rotary_frequencies(d, 1e4f, {.type = "llama3", .factor = 8.0}, 8),
                      Catch::Contains("llama3 needs the original context length"));
    CHECK_THROWS_WITH(
        nn::RotaryEmbedding(d, 8, 1e4f, nn::RotaryScaling{.type = "linear", .factor = -1.0}),
        Catch::Contains("factor must be positive"));
  }
}

TEST_CASE("RotaryEmbedding scales its tables, and dynamic ones follow the length",
          "[rotary][llama_families]") {
  const nn::RotaryScaling yarn{.type = "yarn", .factor = 2.0};
  nn::RotaryEmbedding scaled(8, 16, 500.0f, yarn);
  const nn::RotaryFrequencies f = nn::rotary_frequencies(8, 500.0f, yarn, 16);
  const std::vector<float> cos = scaled->cos.to_vector();
  CHECK(cos[0] == Approx(f.attention_scaling));  // position 0: cos 0 times the attention factor
  CHECK(cos[5 * 8 + 1] ==
        Approx(std::cos(5.0f * f.inverse[1]) * f.attention_scaling).epsilon(1e-6));

  const nn::RotaryScaling dynamic{.type = "dynamic", .factor = 4.0, .original_context_length = 8};
  nn::RotaryEmbedding rope(8, 32, 500.0f, dynamic);
  tp::manual_seed(3);
  for (int64_t time : {6, 20, 8, 20, 12}) {
    INFO("time " << time);
    const tp::Tensor x = tp::randn({2, 3, time, 8});
    const nn::RotaryFrequencies g = nn::rotary_frequencies(8, 500.0f, dynamic, 32, time);
    std::vector<float> c(static_cast<size_t>(time * 8)), s(c.size());
    for (int64_t t = 0; t < time; ++t)
      for (int64_t k = 0; k < 8; ++k) {
        const float angle = static_cast<float>(t) * g.inverse[k % 4];
        c[t * 8 + k] = static_cast<float>(std::cos(static_cast<double>(angle)));
        s[t * 8 + k] = static_cast<float>(std::sin(static_cast<double>(angle)));
      }
    const tp::Tensor expected =
        tp::rotary_embedding(x, tp::from_vector(c, {time, 8}), tp::from_vector(s, {time, 8}));
    CHECK(rope(x).to_vector() == expected.to_vector());
  }
}

TEST_CASE("GroupedQueryAttention takes a head size of its own, biases and q/k norms",
          "[grouped_query_attention][llama_families]") {
  nn::GroupedQueryAttention attention(nn::GroupedQueryAttentionOptions{.width = 16,
                                                                       .heads = 4,
                                                                       .kv_heads = 2,
                                                                       .context_length = 16,
                                                                       .head_dim = 6,
                                                                       .qkv_bias = true,
                                                                       .o_bias = true,
                                                                       .qk_norm = true,
                                                                       .sliding_window = 6});
  std::vector<std::string> names;
  for (const auto& [name, p] : attention->named_parameters())
    names.push_back(name + " " + tp::to_string(p.shape()));
  CHECK(names == std::vector<std::string>{"q_proj.weight [24, 16]", "q_proj.bias [24]",
                                          "k_proj.weight [12, 16]", "k_proj.bias [12]",
                                          "v_proj.weight [12, 16]", "v_proj.bias [12]",
                                          "o_proj.weight [16, 24]", "o_proj.bias [16]",
                                          "q_norm.weight [6]", "k_norm.weight [6]"});
  // Past the window (14 tokens, a window of 6): rows within the window are causal attention's;
  // a later row sees its 6 latest tokens only, so (rotary scores depending on relative positions
  // alone) it is the last row of the attention of those 6 tokens.
  tp::manual_seed(4);
  const tp::Tensor x = tp::randn({2, 14, 16});
  const tp::Tensor y = attention(x);
  CHECK(y.shape() == tp::Shape{2, 14, 16});
  auto rows = [](const tp::Tensor& t, int64_t start, int64_t n) {
    return tp::narrow(t, 1, start, n).to_vector();
  };
  auto close = [](const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-5));
  };
  close(rows(y, 0, 6), attention(tp::narrow(x, 1, 0, 6)).to_vector());
  close(rows(y, 13, 1), rows(attention(tp::narrow(x, 1, 8, 6)), 5, 1));
  tp::sum(y).backward();  // the composed form has gradients
  CHECK(attention->q_proj->weight.grad().defined());
  CHECK_THROWS_WITH(
      nn::GroupedQueryAttention(nn::GroupedQueryAttentionOptions{
          .width = 16, .heads = 4, .kv_heads = 2, .context_length = 8, .head_dim = 5}),
      Catch::Contains("head size (5) must be even"));
}

TEST_CASE("Llama configs of each family check their flags", "[llama][llama_families]") {
  for (const char* type : {"llama", "qwen2", "qwen3", "mistral"}) {
    INFO(type);
    nn::Llama model = perturbed(family_config(type), 1);
    CHECK(model(tokens(2, 9, 29)).shape() == tp::Shape{2, 9, 29});
  }
  auto refused = [](nn::LlamaConfig c, const std::string& what) {
    CHECK_THROWS_WITH(nn::Llama(c), Catch::Contains(what));
  };
  nn::LlamaConfig c = family_config("qwen2");
  c.qkv_bias = false;
  refused(c, "a qwen2 model has biases on q_proj, k_proj and v_proj only");
  c = family_config("llama");
  c.qk_norm = true;
  refused(c, "qk_norm belongs to qwen3 models");
  c = family_config("llama");
  c.sliding_window = 4;
  refused(c, "sliding_window belongs to mistral models");
  c = family_config("llama");
  c.model_type = "gemma";
  refused(c, "model_type \"gemma\" is not one of");
  c = family_config("qwen3");
  c.head_dim = 7;
  refused(c, "head_dim (7) must be even");
  // Biases start at 0, as transformers initialises them.
  nn::Llama qwen(family_config("qwen2"));
  CHECK(qwen->find_tensor("layers.0.self_attn.q_proj.bias").to_vector() ==
        std::vector<float>(16, 0.0f));
}

TEST_CASE("Qwen2, Qwen3 and Mistral config.json files map both ways", "[hugging_face_llama]") {
  const nn::LlamaConfig qwen3 = nn::llama_config_from_json(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 50,
    "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "max_position_embeddings": 40, "rms_norm_eps": 1e-06, "attention_bias": false,
    "use_sliding_window": false, "sliding_window": null, "max_window_layers": 2,
    "layer_types": ["full_attention", "full_attention"],
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                        "original_max_position_embeddings": 10},
    "tie_word_embeddings": true})");
  CHECK(qwen3.model_type == "qwen3");
  CHECK(qwen3.qk_norm);
  CHECK_FALSE(qwen3.qkv_bias);
  CHECK(qwen3.head_dim == 16);
  CHECK(qwen3.head_size() == 16);
  CHECK(qwen3.rope_theta == 1000000.0f);
  CHECK(qwen3.rope_scaling ==
        nn::RotaryScaling{.type = "yarn", .factor = 4.0, .original_context_length = 10});

  const nn::LlamaConfig qwen2 = nn::llama_config_from_json(
      R"({"model_type": "qwen2", "hidden_size": 32, "num_attention_heads": 4,
          "rope_theta": 10000.0, "rope_scaling": null, "use_sliding_window": false})");
  CHECK(qwen2.qkv_bias);
  CHECK_FALSE(qwen2.o_bias);
  CHECK(qwen2.vocab_size == 151936);
  CHECK(qwen2.head_dim == 0);

  const nn::LlamaConfig mistral = nn::llama_config_from_json(
      R"({"model_type": "mistral", "hidden_size": 64, "num_attention_heads": 16,
          "head_dim": 32, "sliding_window": 4096, "max_position_embeddings": 512})");
  CHECK(mistral.sliding_window == 4096);
  CHECK(mistral.head_dim == 32);
  CHECK(mistral.n_kv_head == 8);

  // transformers 4's rope_scaling of Llama 3.1; dynamic scales past max_position_embeddings.
  const nn::LlamaConfig llama3 = nn::llama_config_from_json(
      R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
          "max_position_embeddings": 131072, "rope_theta": 500000.0,
          "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  CHECK(llama3.rope_scaling == nn::RotaryScaling{.type = "llama3",
                                                 .factor = 8.0,
                                                 .original_context_length = 8192,
                                                 .low_freq_factor = 1.0,
                                                 .high_freq_factor = 4.0});
  const nn::LlamaConfig dynamic = nn::llama_config_from_json(
      R"({"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 100,
          "rope_scaling": {"type": "dynamic", "factor": 2.0}})");
  CHECK(dynamic.context_length == 200);
  CHECK(dynamic.rope_scaling.original_context_length == 100);

  // Every family's config.json reads back as the same config, under its own class.
  for (const char* type : {"llama", "qwen2", "qwen3", "mistral"}) {
    INFO(type);
    nn::LlamaConfig c = family_config(type);
    if (std::string(type) == "qwen2")
      c.rope_scaling = {.type = "dynamic", .factor = 3.0, .original_context_length = 8};
    if (std::string(type) == "mistral") c.rope_scaling = {.type = "linear", .factor = 2.0};
    if (std::string(type) == "qwen3")
      c.rope_scaling = {.type = "yarn", .factor = 2.0, .attention_factor = 1.25, .truncate = false};
    const std::string text = nn::llama_config_to_json(c);
    CHECK(nn::llama_config_from_json(text) == c);
    const nlohmann::json j = nlohmann::json::parse(text);
    CHECK(j["model_type"] == type);
  }
  CHECK(nlohmann::json::parse(nn::llama_config_to_json(family_config("qwen3")))["architectures"] ==
        nlohmann::json::array({"Qwen3ForCausalLM"}));

  auto refused = [](const std::string& text, const std::string& what) {
    INFO(text);
    CHECK_THROWS_WITH(nn::llama_config_from_json(text, "x/config.json"),
                      Catch::Contains("x/config.json") && Catch::Contains(what));
  };
  refused(R"({"model_type": "gemma"})", "model_type is \"gemma\"");
  refused(R"({"model_type": "qwen2", "use_sliding_window": true})", "use_sliding_window is true");
  refused(R"({"rope_scaling": {"rope_type": "longrope", "factor": 2.0}})",
          "rope type \"longrope\"");
  refused(R"({"partial_rotary_factor": 0.5})", "partial_rotary_factor is 0.5");
  refused(R"({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}})",
          "no original_max_position_embeddings");
  refused(R"({"rope_scaling": {"rope_type": "linear", "factor": "x"}})",
          "rope_scaling.factor is \"x\", not a number");
  refused(R"({"model_type": "mistral", "attention_bias": true})", "attention_bias is true");
}

TEST_CASE("Qwen2, Qwen3 and Mistral folders save and load back", "[hugging_face_llama]") {
  for (const char* type : {"llama", "qwen2", "qwen3", "mistral"}) {
    INFO(type);
    nn::Llama model = perturbed(family_config(type), 2);
    const std::string folder = test_files::temp_path(std::string("family_") + type);
    nn::save_pretrained(model, folder);
    nn::Llama loaded = nn::llama_from_pretrained(folder);
    CHECK_FALSE(loaded->is_training());
    CHECK(loaded->config() == model->config());
    const tp::Tensor x = tokens(2, 19, 29);
    CHECK(loaded(x).to_vector() == model(x).to_vector());
    const tp::StateDict stored = tp::load_safetensors_folder(folder);
    std::vector<std::string> names = nn::llama_tensor_names(model->config()), keys = stored.keys();
    std::sort(names.begin(), names.end());
    std::sort(keys.begin(), keys.end());
    CHECK(keys == names);
    if (std::string(type) == "qwen2") {
      CHECK(stored.contains("model.layers.1.self_attn.v_proj.bias"));
      CHECK_FALSE(stored.contains("model.layers.1.self_attn.o_proj.bias"));
    }
    if (std::string(type) == "qwen3")
      CHECK(stored.at("model.layers.0.self_attn.k_norm.weight").shape() == tp::Shape{6});
    fs::remove_all(folder);
  }
}

TEST_CASE("weights that do not fit config.json are named with the folder and the file",
          "[hugging_face_llama]") {
  nn::Llama model = perturbed(family_config("qwen2"), 3);
  const std::string folder = test_files::temp_path("family_misfit");
  nn::save_pretrained(model, folder);
  // A config that says more layers than the weights hold.
  nn::LlamaConfig more = family_config("qwen2");
  more.n_layer = 3;
  {
    std::ofstream out(fs::path(folder) / "config.json");
    out << nn::llama_config_to_json(more);
  }
  CHECK_THROWS_WITH(nn::llama_from_pretrained(folder),
                    Catch::Contains((fs::path(folder) / "model.safetensors").string()) &&
                        Catch::Contains((fs::path(folder) / "config.json").string()) &&
                        Catch::Contains("missing model.layers.2.input_layernorm.weight") &&
                        Catch::Contains("model.layers.2.self_attn.q_proj.bias"));
  fs::remove_all(folder);
}

TEST_CASE("gpt_from_pretrained returns the model in eval mode and names misfit files",
          "[hugging_face]") {
  nn::GPT gpt(
      nn::GPTConfig{.vocab_size = 31, .context_length = 8, .n_layer = 1, .n_head = 2, .width = 16});
  const std::string folder = test_files::temp_path("gpt_eval");
  nn::save_pretrained(gpt, folder);
  nn::GPT loaded = nn::gpt_from_pretrained(folder);
  CHECK_FALSE(loaded->is_training());
  // A config.json with more layers than the weights hold names the folder's files.
  nn::GPTConfig more = gpt->config();
  more.n_layer = 2;
  std::ofstream(fs::path(folder) / "config.json") << nn::gpt2_config_to_json(more);
  CHECK_THROWS_WITH(nn::gpt_from_pretrained(folder),
                    Catch::Contains((fs::path(folder) / "model.safetensors").string()) &&
                        Catch::Contains((fs::path(folder) / "config.json").string()) &&
                        Catch::Contains("transformer.h.1."));
  fs::remove_all(folder);
}

TEST_CASE("RotaryEmbedding keeps tables for kEagerRows positions and computes longer ones",
          "[rotary][llama_families]") {
  const int64_t rows = nn::RotaryEmbeddingImpl::kEagerRows;
  nn::RotaryEmbedding rope(4, rows + 100, 10000.0f);
  CHECK(rope->cos.shape() == tp::Shape{rows, 4});
  tp::manual_seed(5);
  const tp::Tensor x = tp::randn({rows + 50, 4});
  const std::vector<float> y = rope(x).to_vector();
  const std::vector<float> head = rope(x.slice0(0, rows)).to_vector();
  CHECK(std::equal(head.begin(), head.end(), y.begin()));
  // The last row, turned by hand: channel pairs (0, 2) and (1, 3).
  const std::vector<float> in = x.to_vector();
  const auto t = static_cast<float>(rows + 49);
  const std::vector<float> inverse = nn::rotary_frequencies(4, 10000.0f, {}, rows + 100).inverse;
  for (int64_t k = 0; k < 4; ++k) {
    const float angle = t * inverse[k % 2];
    const double own = in[(rows + 49) * 4 + k];
    const double other = k < 2 ? -in[(rows + 49) * 4 + k + 2] : in[(rows + 49) * 4 + k - 2];
    CHECK(y[(rows + 49) * 4 + k] ==
          Approx(own * std::cos(double(angle)) + other * std::sin(double(angle))).margin(1e-5));
  }
}

TEST_CASE("a head_dim equal to width / n_head is the default, saved and loaded as such",
          "[llama][llama_families]") {
  nn::LlamaConfig c = family_config("llama");
  c.head_dim = c.width / c.n_head;
  nn::Llama model = perturbed(c, 6);
  CHECK(model->config().head_dim == 0);
  const std::string folder = test_files::temp_path("family_head_dim");
  nn::save_pretrained(model, folder);
  nn::Llama other(c);
  nn::load_pretrained(other, folder);
  const tp::Tensor x = tokens(1, 7, 29);
  CHECK(other(x).to_vector() == model(x).to_vector());
  fs::remove_all(folder);
}

TEST_CASE("config.json files as Qwen2.5, Qwen3, Mistral and Llama 3.2 checkpoints ship them read",
          "[hugging_face_llama]") {
  // Their fields as published (transformers 4), sizes as the checkpoints have them.
  const nn::LlamaConfig qwen25 = nn::llama_config_from_json(R"({
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 3584,
    "initializer_range": 0.02, "intermediate_size": 18944, "max_position_embeddings": 32768,
    "max_window_layers": 28, "model_type": "qwen2", "num_attention_heads": 28,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": true,
    "use_sliding_window": false, "vocab_size": 152064})");
  CHECK(qwen25.qkv_bias);
  CHECK(qwen25.head_size() == 128);
  CHECK(qwen25.sliding_window == 0);
  const nn::LlamaConfig qwen3 = nn::llama_config_from_json(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12288,
    "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
    "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
    "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
    "vocab_size": 151936})");
  CHECK(qwen3.qk_norm);
  CHECK(qwen3.head_size() == 128);
  const nn::LlamaConfig mistral = nn::llama_config_from_json(R"({
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.34.0",
    "use_cache": true, "vocab_size": 32000})");
  CHECK(mistral.sliding_window == 4096);
  CHECK(mistral.n_kv_head == 8);
  const nn::LlamaConfig llama32 = nn::llama_config_from_json(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
    "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})");
  CHECK(llama32.rope_scaling.type == "llama3");
  CHECK(llama32.rope_scaling.factor == 32.0);
  CHECK(llama32.head_dim == 0);
  // Its rotary tables: 8,192 positions held, not 131,072.
  nn::RotaryEmbedding rope(64, llama32.context_length, llama32.rope_theta, llama32.rope_scaling);
  CHECK(rope->cos.size(0) == nn::RotaryEmbeddingImpl::kEagerRows);
}
