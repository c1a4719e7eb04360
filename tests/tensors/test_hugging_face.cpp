// Tests for nn/hugging_face.h: GPT-2 config.json both ways and the configs that cannot map, the
// name and layout mapping of GPT2LMHeadModel (Conv1D transposed, tied head omitted), folders
// saved and loaded back to the same logits, and weights that do not fit named. The comparison
// with transformers itself is check_gpt2_transformers.py (CTest:
// tensors_gpt2_matches_transformers).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "temp_path.h"
#include "tensorplay/nn/hf/hugging_face.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;
namespace fs = std::filesystem;

namespace {

// config.json as transformers 5 writes it for GPT2Config(vocab_size=50, n_positions=16,
// n_embd=32, n_layer=2, n_head=4).
const char* kTransformersConfig = R"({
  "activation_function": "gelu_new",
  "add_cross_attention": false,
  "architectures": ["GPT2LMHeadModel"],
  "attn_pdrop": 0.1,
  "bos_token_id": 50256,
  "dtype": "float32",
  "embd_pdrop": 0.1,
  "eos_token_id": 50256,
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2",
  "n_embd": 32,
  "n_head": 4,
  "n_inner": null,
  "n_layer": 2,
  "n_positions": 16,
  "pad_token_id": null,
  "reorder_and_upcast_attn": false,
  "resid_pdrop": 0.1,
  "scale_attn_by_inverse_layer_idx": false,
  "scale_attn_weights": true,
  "summary_activation": null,
  "summary_first_dropout": 0.1,
  "summary_proj_to_labels": true,
  "summary_type": "cls_index",
  "summary_use_proj": true,
  "tie_word_embeddings": true,
  "transformers_version": "5.24.0",
  "use_cache": true,
  "vocab_size": 50
})";

std::string with(const std::string& key, const nlohmann::json& value) {
  nlohmann::json j = nlohmann::json::parse(kTransformersConfig);
  j[key] = value;
  return j.dump();
}

nn::GPTConfig small_config(bool tied) {
  return {.vocab_size = 23,
          .context_length = 12,
          .n_layer = 2,
          .n_head = 2,
          .width = 16,
          .dropout = 0.0f,
          .tie_weights = tied};
}

// A GPT whose biases and norms are not at their initial 0 and 1, so that a mapping mistake in
// any of them changes the logits.
nn::GPT perturbed_gpt(const nn::GPTConfig& config, uint64_t seed) {
  tp::manual_seed(seed);
  nn::GPT model(config);
  tp::NoGradGuard no_grad;
  for (auto& [name, p] : model->named_parameters()) p.copy_(p + tp::randn(p.shape()) * 0.1f);
  model->eval();
  return model;
}

tp::Tensor tokens(int64_t batch, int64_t time, int64_t vocab) {
  std::vector<float> ids;
  for (int64_t i = 0; i < batch * time; ++i) ids.push_back(static_cast<float>((i * 7 + 3) % vocab));
  return tp::from_vector(ids, {batch, time});
}

}  // namespace

TEST_CASE("GPT-2 config.json maps to a GPTConfig", "[hugging_face]") {
  nn::GPTConfig c = nn::gpt2_config_from_json(kTransformersConfig);
  CHECK(c.vocab_size == 50);
  CHECK(c.context_length == 16);
  CHECK(c.width == 32);
  CHECK(c.n_layer == 2);
  CHECK(c.n_head == 4);
  CHECK(c.tie_weights);
  CHECK(c.dropout == 0.1f);
  CHECK_FALSE(nn::gpt2_config_from_json(with("tie_word_embeddings", false)).tie_weights);
  CHECK(nn::gpt2_config_from_json(with("activation_function", "gelu_pytorch_tanh")).width == 32);
  CHECK(nn::gpt2_config_from_json(with("n_inner", 128)).width == 32);
  // Absent fields take GPT2Config's defaults.
  nn::GPTConfig d = nn::gpt2_config_from_json("{}");
  CHECK(d.vocab_size == 50257);
  CHECK(d.context_length == 1024);
  CHECK(d.width == 768);

  // Written back, it reads the same, and carries what transformers needs.
  nn::GPTConfig e = small_config(false);
  e.dropout = 0.1f;
  const std::string text = nn::gpt2_config_to_json(e, tp::DType::BFloat16);
  nn::GPTConfig f = nn::gpt2_config_from_json(text);
  CHECK(f.vocab_size == e.vocab_size);
  CHECK(f.context_length == e.context_length);
  CHECK(f.width == e.width);
  CHECK(f.n_layer == e.n_layer);
  CHECK(f.n_head == e.n_head);
  CHECK(f.tie_weights == e.tie_weights);
  CHECK(f.dropout == e.dropout);
  CHECK_THAT(text, Catch::Contains("\"resid_pdrop\": 0.1,"));
  CHECK_THAT(text, Catch::Contains("\"model_type\": \"gpt2\""));
  CHECK_THAT(text, Catch::Contains("\"dtype\": \"bfloat16\""));
  CHECK_THAT(text, Catch::Contains("\"layer_norm_epsilon\": 1e-05"));
  CHECK_THAT(text, Catch::Contains("\"architectures\": [\n    \"GPT2LMHeadModel\"\n  ]"));
}

TEST_CASE("a GPT-2 config that tensorplay's GPT cannot compute is a clear error",
          "[hugging_face]") {
  auto error = [](const std::string& text) {
    try {
      nn::gpt2_config_from_json(text, "m/config.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(error(with("activation_function", "gelu")),
             Catch::Contains("m/config.json: activation_function is \"gelu\"") &&
                 Catch::Contains("tanh form"));
  CHECK_THAT(error(with("activation_function", "relu")), Catch::Contains("\"relu\""));
  CHECK_THAT(error(with("n_inner", 100)), Catch::Contains("n_inner is 100"));
  CHECK_THAT(error(with("layer_norm_epsilon", 1e-6)), Catch::Contains("layer_norm_epsilon is"));
  CHECK_THAT(error(with("scale_attn_weights", false)), Catch::Contains("scale_attn_weights"));
  CHECK_THAT(error(with("scale_attn_by_inverse_layer_idx", true)),
             Catch::Contains("scale_attn_by_inverse_layer_idx"));
  CHECK_THAT(error(with("add_cross_attention", true)), Catch::Contains("add_cross_attention"));
  CHECK_THAT(error(with("model_type", "llama")),
             Catch::Contains("model_type is \"llama\", not \"gpt2\""));
  CHECK_THAT(error(with("n_embd", "32")), Catch::Contains("n_embd is \"32\", not a positive"));
  CHECK_THAT(error(with("n_head", 5)), Catch::Contains("n_head (5) does not divide n_embd (32)"));
  CHECK_THAT(error(with("n_layer", 0)), Catch::Contains("n_layer is 0"));
  CHECK_THAT(error(with("tie_word_embeddings", 1)), Catch::Contains("not a boolean"));
  CHECK_THAT(error(with("resid_pdrop", 2)), Catch::Contains("resid_pdrop 2 is not in [0, 1]"));
  CHECK_THAT(error("{"), Catch::Contains("not valid JSON"));
  CHECK_THAT(error("[]"), Catch::Contains("not a JSON object"));
}

TEST_CASE("GPT tensors map to GPT2LMHeadModel's names and Conv1D layouts", "[hugging_face]") {
  nn::GPT tied = perturbed_gpt(small_config(true), 1);
  tp::StateDict hf = nn::to_gpt2_state_dict(*tied);
  CHECK(hf.size() == 2 + 2 * 12 + 2);
  CHECK_FALSE(hf.contains("lm_head.weight"));
  CHECK(hf.at("transformer.wte.weight").shape() == tp::Shape{23, 16});
  CHECK(hf.at("transformer.wpe.weight").shape() == tp::Shape{12, 16});
  CHECK(hf.at("transformer.h.1.attn.c_attn.weight").shape() == tp::Shape{16, 48});
  CHECK(hf.at("transformer.h.1.attn.c_attn.bias").shape() == tp::Shape{48});
  CHECK(hf.at("transformer.h.0.attn.c_proj.weight").shape() == tp::Shape{16, 16});
  CHECK(hf.at("transformer.h.0.mlp.c_fc.weight").shape() == tp::Shape{16, 64});
  CHECK(hf.at("transformer.h.0.mlp.c_proj.weight").shape() == tp::Shape{64, 16});
  CHECK(hf.at("transformer.ln_f.bias").shape() == tp::Shape{16});

  // Conv1D holds [in, out]: element (i, o) of GPT-2's c_attn is element (o, i) of the Linear.
  const tp::Tensor& linear = tied->blocks->at<nn::TransformerBlockImpl>(1)->attn->c_attn->weight;
  std::vector<float> ours = linear.to_vector(),
                     theirs = hf.at("transformer.h.1.attn.c_attn.weight").to_vector();
  for (int64_t o : {0, 17, 47})
    for (int64_t i : {0, 5, 15}) CHECK(theirs[i * 48 + o] == ours[o * 16 + i]);
  // Untransposed tensors share the model's storage.
  CHECK(hf.at("transformer.wte.weight").shares_storage(tied->wte->weight));

  nn::GPT untied = perturbed_gpt(small_config(false), 2);
  tp::StateDict hf2 = nn::to_gpt2_state_dict(*untied);
  CHECK(hf2.size() == 2 + 2 * 12 + 2 + 1);
  CHECK(hf2.at("lm_head.weight").shape() == tp::Shape{23, 16});

  // Back: the same tensors, tied or not.
  for (nn::GPT* model : {&tied, &untied}) {
    tp::StateDict back =
        nn::from_gpt2_state_dict(nn::to_gpt2_state_dict(**model), (*model)->config());
    tp::StateDict original = (*model)->state_dict();
    REQUIRE(back.size() == original.size());
    for (const auto& [name, t] : original) CHECK(back.at(name).to_vector() == t.to_vector());
  }
}

TEST_CASE("gradients by parameter name map to GPT-2's names too", "[hugging_face]") {
  nn::GPT model = perturbed_gpt(small_config(true), 11);
  tp::sum(model(tokens(1, 5, 23))).backward();
  tp::StateDict grads;
  for (const auto& [name, p] : model->named_parameters()) grads.insert(name, p.grad());
  CHECK_FALSE(grads.contains("lm_head.weight"));  // tied: listed once, as wte.weight
  tp::StateDict hf = nn::to_gpt2_state_dict(grads, model->config());
  CHECK(hf.size() == 2 + 2 * 12 + 2);
  CHECK(hf.at("transformer.h.0.mlp.c_fc.weight").shape() == tp::Shape{16, 64});
  std::vector<float>
      ours = model->blocks->at<nn::TransformerBlockImpl>(0)->mlp->c_fc->weight.grad().to_vector(),
      theirs = hf.at("transformer.h.0.mlp.c_fc.weight").to_vector();
  CHECK(theirs[3 * 64 + 40] == ours[40 * 16 + 3]);
  grads = tp::StateDict();
  CHECK_THROWS_WITH(nn::to_gpt2_state_dict(grads, model->config()),
                    Catch::Contains("no tensor wte.weight for a GPT with vocab_size=23"));
}

TEST_CASE("GPT-2 weights that do not fit the config are named", "[hugging_face]") {
  nn::GPT model = perturbed_gpt(small_config(true), 3);
  const nn::GPTConfig config = model->config();
  const tp::StateDict hf = nn::to_gpt2_state_dict(*model);
  auto error = [&](const tp::StateDict& d) {
    try {
      nn::from_gpt2_state_dict(d, config);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  auto edited = [&](const std::string& drop, const std::string& add, tp::Tensor t) {
    tp::StateDict d;
    for (const auto& [name, tensor] : hf)
      if (name != drop) d.insert(name, tensor);
    if (!add.empty()) d.insert(add, t);
    return d;
  };
  CHECK_THAT(error(edited("transformer.h.1.mlp.c_fc.bias", "", {})),
             Catch::Contains("missing transformer.h.1.mlp.c_fc.bias"));
  CHECK_THAT(error(edited("transformer.h.0.attn.c_attn.weight",
                          "transformer.h.0.attn.c_attn.weight", tp::zeros({48, 16}))),
             Catch::Contains("transformer.h.0.attn.c_attn.weight is [48, 16], expected [16, 48]"));
  CHECK_THAT(error(edited("", "transformer.h.2.ln_1.weight", tp::zeros({16}))),
             Catch::Contains("not part of GPT-2: transformer.h.2.ln_1.weight"));
  // Legacy mask buffers, a written-out tied head, and GPT2Model's unprefixed names are fine.
  CHECK(error(edited("", "transformer.h.0.attn.bias", tp::zeros({1, 1, 12, 12}))) == "accepted");
  CHECK(error(edited("", "transformer.h.0.attn.masked_bias", tp::scalar_tensor(-1e4f))) ==
        "accepted");
  CHECK(error(edited("", "lm_head.weight", tp::zeros({23, 16}))) == "accepted");
  tp::StateDict bare;
  for (const auto& [name, t] : hf) bare.insert(name.substr(std::string("transformer.").size()), t);
  CHECK(error(bare) == "accepted");
}

TEST_CASE("GPT-2 folders save and load back to the same logits", "[hugging_face]") {
  for (bool tied : {true, false}) {
    INFO("tied " << tied);
    nn::GPT model = perturbed_gpt(small_config(tied), 4);
    const std::string folder = test_files::temp_path("gpt2_folder");
    nn::save_pretrained(model, folder);
    CHECK(fs::exists(fs::path(folder) / "config.json"));
    CHECK(fs::exists(fs::path(folder) / "model.safetensors"));

    nn::GPT loaded = nn::gpt_from_pretrained(folder);
    loaded->eval();
    const tp::Tensor x = tokens(2, 9, 23);
    CHECK(loaded(x).to_vector() == model(x).to_vector());
    CHECK(loaded->config().tie_weights == tied);
    if (tied) CHECK(loaded->lm_head->weight.is_same(loaded->wte->weight));

    // Into an existing model; sharded folders too.
    nn::GPT other = perturbed_gpt(small_config(tied), 5);
    nn::save_pretrained(model, folder, 4096);
    CHECK(fs::exists(fs::path(folder) / "model.safetensors.index.json"));
    CHECK_FALSE(fs::exists(fs::path(folder) / "model.safetensors"));
    nn::load_pretrained(other, folder);
    CHECK(other(x).to_vector() == model(x).to_vector());
    fs::remove_all(folder);
  }
}

TEST_CASE("GPT-2 folders in the original release's layout load", "[hugging_face]") {
  // GPT2Model's names without "transformer.", each block's mask buffer saved, n_ctx given.
  nn::GPT model = perturbed_gpt(small_config(true), 12);
  tp::StateDict bare;
  for (const auto& [name, t] : nn::to_gpt2_state_dict(*model)) {
    const std::string short_name = name.substr(std::string("transformer.").size());
    bare.insert(short_name, t);
    if (short_name.find(".ln_1.weight") != std::string::npos)
      bare.insert(short_name.substr(0, short_name.find(".ln_1")) + ".attn.bias",
                  tp::ones({1, 1, 12, 12}));
  }
  const std::string folder = test_files::temp_path("gpt2_original");
  fs::create_directories(folder);
  tp::save_safetensors(bare, (fs::path(folder) / "model.safetensors").string());
  std::ofstream(fs::path(folder) / "config.json")
      << R"({"activation_function": "gelu_new", "model_type": "gpt2", "n_ctx": 12,
             "n_embd": 16, "n_head": 2, "n_layer": 2, "n_positions": 12, "vocab_size": 23,
             "resid_pdrop": 0.1, "task_specific_params": {"text-generation": {"do_sample": true}}})";
  nn::GPT loaded = nn::gpt_from_pretrained(folder);
  loaded->eval();
  const tp::Tensor x = tokens(1, 12, 23);
  CHECK(loaded(x).to_vector() == model(x).to_vector());
  fs::remove_all(folder);
}

TEST_CASE("GPT-2 folders keep bfloat16 weights", "[hugging_face]") {
  nn::GPT model = perturbed_gpt(small_config(true), 6);
  model->to(tp::DType::BFloat16);
  const std::string folder = test_files::temp_path("gpt2_bf16");
  nn::save_pretrained(model, folder);
  std::ifstream config(fs::path(folder) / "config.json");
  std::stringstream text;
  text << config.rdbuf();
  CHECK_THAT(text.str(), Catch::Contains("\"dtype\": \"bfloat16\""));
  tp::StateDict stored = tp::load_safetensors_folder(folder);
  CHECK(stored.at("transformer.h.0.attn.c_attn.weight").dtype() == tp::DType::BFloat16);

  nn::GPT as_bf16 = nn::gpt_from_pretrained(folder, tp::DType::BFloat16);
  CHECK(as_bf16->wte->weight.dtype() == tp::DType::BFloat16);
  nn::GPT as_f32 = nn::gpt_from_pretrained(folder);
  CHECK(as_f32->wte->weight.dtype() == tp::DType::Float32);
  CHECK(as_f32->wte->weight.to_vector() == model->wte->weight.to_vector());
  fs::remove_all(folder);
}

TEST_CASE("GPT-2 folders that cannot load say why", "[hugging_face]") {
  const std::string folder = test_files::temp_path("gpt2_bad");
  fs::create_directories(folder);
  CHECK_THROWS_WITH(nn::gpt_from_pretrained(folder), Catch::Contains("has no config.json"));
  nn::GPT model = perturbed_gpt(small_config(true), 7);
  nn::save_pretrained(model, folder);
  nn::GPT wider = perturbed_gpt({.vocab_size = 23,
                                 .context_length = 12,
                                 .n_layer = 2,
                                 .n_head = 2,
                                 .width = 32,
                                 .dropout = 0.0f},
                                8);
  CHECK_THROWS_WITH(nn::load_pretrained(wider, folder),
                    Catch::Contains("holds a GPT with vocab_size=23") &&
                        Catch::Contains("width=16") && Catch::Contains("width=32"));
  fs::remove(fs::path(folder) / "model.safetensors");
  CHECK_THROWS_WITH(nn::gpt_from_pretrained(folder), Catch::Contains("holds neither"));
  fs::remove_all(folder);
}

TEST_CASE("cuda: a GPT on the GPU saves a GPT-2 folder and loads one", "[hugging_face][cuda]") {
  if (!tp::cuda_available()) {
    WARN("no CUDA device: skipped");
    return;
  }
  const tp::Device gpu("cuda:0");
  nn::GPT on_cpu = perturbed_gpt(small_config(true), 9);
  nn::GPT on_gpu = perturbed_gpt(small_config(true), 9);
  on_gpu->to(gpu);
  const std::string folder = test_files::temp_path("gpt2_cuda");
  nn::save_pretrained(on_gpu, folder);  // the weights come to the host to be written
  nn::GPT loaded = nn::gpt_from_pretrained(folder);
  loaded->eval();
  const tp::Tensor x = tokens(2, 9, 23);
  CHECK(loaded(x).to_vector() == on_cpu(x).to_vector());

  nn::GPT other = perturbed_gpt(small_config(true), 10);
  other->to(gpu);
  nn::load_pretrained(other, folder);  // host tensors into device parameters
  CHECK(other->wte->weight.is_cuda());
  std::vector<float> got = other(x.to(gpu)).to_vector(), want = on_cpu(x).to_vector();
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-4));
  fs::remove_all(folder);
}
