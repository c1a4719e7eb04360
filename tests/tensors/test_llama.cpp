// Tests for nn/llama.h: names and sizes, tied and untied heads, initialisation, causality, the
// forward composed from the children, bfloat16, training on a tiny task, and bad configurations.
#include <catch2/catch.hpp>
#include <cmath>

#include "tensorplay/nn/llama.h"
#include "tensorplay/nn/llama_block.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

namespace {

nn::LlamaConfig tiny(bool tied) {
  return {.vocab_size = 19,
          .context_length = 12,
          .n_layer = 2,
          .n_head = 4,
          .n_kv_head = 2,
          .width = 16,
          .mlp_width = 40,
          .rope_theta = 500.0f,
          .norm_eps = 1e-5f,
          .tie_weights = tied};
}

tp::Tensor token_ids(int64_t b, int64_t t, int64_t vocab) {
  std::vector<float> ids;
  for (int64_t i = 0; i < b * t; ++i) ids.push_back(static_cast<float>((i * 7 + 3) % vocab));
  return tp::from_vector(ids, {b, t});
}

}  // namespace

TEST_CASE("Llama has transformers' names, less model., and the sizes of its config", "[llama]") {
  tp::manual_seed(61);
  nn::Llama model(tiny(false));
  auto names = model->state_dict().keys();
  CHECK(names.size() == 1 + 2 * 9 + 1 + 1);
  CHECK(names.front() == "embed_tokens.weight");
  CHECK(std::find(names.begin(), names.end(), "layers.1.self_attn.k_proj.weight") != names.end());
  CHECK(names[names.size() - 2] == "norm.weight");
  CHECK(names.back() == "lm_head.weight");
  CHECK(model->find_tensor("layers.0.self_attn.k_proj.weight").shape() == tp::Shape{8, 16});
  CHECK(model->find_tensor("layers.0.mlp.gate_proj.weight").shape() == tp::Shape{40, 16});
  int64_t count = 0;
  for (const auto& p : model->parameters()) count += p.numel();
  const int64_t per_layer = 16 + 16 * 16 + 2 * 8 * 16 + 16 * 16 + 16 + 3 * 40 * 16;
  CHECK(count == 19 * 16 + 2 * per_layer + 16 + 19 * 16);
  CHECK(model(token_ids(3, 12, 19)).shape() == tp::Shape{3, 12, 19});
  CHECK_THAT(model->extra_repr(), Catch::Contains("n_kv_head=2"));
  // Transformers' initialisation: N(0, 0.02) weights, unit norms.
  CHECK(model->norm->weight.to_vector() == std::vector<float>(16, 1.0f));
  double sum = 0, squares = 0;
  std::vector<float> w = model->find_tensor("layers.1.mlp.up_proj.weight").to_vector();
  for (float v : w) sum += v, squares += double(v) * v;
  CHECK(std::abs(sum / w.size()) < 0.004);
  CHECK(std::sqrt(squares / w.size()) == Approx(0.02).epsilon(0.1));
}

TEST_CASE("a tied Llama shares one tensor between the embedding and the head", "[llama]") {
  nn::Llama model(tiny(true));
  CHECK(model->lm_head->weight.is_same(model->embed_tokens->weight));
  for (auto& [name, p] : model->named_parameters()) CHECK(name != "lm_head.weight");
  CHECK(model->state_dict().contains("lm_head.weight"));
  nn::LlamaConfig c = tiny(false);
  c.n_kv_head = 0;  // means n_head
  CHECK(nn::Llama(c)->config().n_kv_head == 4);
}

TEST_CASE("Llama's forward is its children composed, and causal", "[llama]") {
  tp::manual_seed(62);
  nn::Llama model(tiny(false));
  tp::Tensor idx = token_ids(2, 10, 19);
  tp::Tensor x = model->embed_tokens(idx);
  for (const auto& block : *model->layers) x = (*block)(x);
  std::vector<float> logits = model(idx).to_vector();
  CHECK(logits == model->lm_head(model->norm(x)).to_vector());
  // A change at position 6 leaves the logits at positions 0..5 as they were.
  std::vector<float> ids = idx.to_vector();
  ids[6] = std::fmod(ids[6] + 1.0f, 19.0f);
  std::vector<float> changed = model(tp::from_vector(ids, {2, 10})).to_vector();
  for (int64_t t = 0; t < 10; ++t) {
    bool same = true;
    for (int64_t v = 0; v < 19; ++v) same = same && changed[t * 19 + v] == logits[t * 19 + v];
    CHECK(same == (t < 6));
  }
}

TEST_CASE("Llama runs in bfloat16 close to float32", "[llama]") {
  tp::manual_seed(63);
  nn::Llama model(tiny(true));
  tp::Tensor idx = token_ids(2, 12, 19);
  std::vector<float> full = model(idx).to_vector();
  model->to(tp::DType::BFloat16);
  tp::Tensor y = model(idx);
  CHECK(y.dtype() == tp::DType::BFloat16);
  std::vector<float> half = y.to_vector();
  double worst = 0, scale = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    worst = std::max(worst, std::abs(double(half[i]) - full[i]));
    scale = std::max(scale, std::abs(double(full[i])));
  }
  CHECK(worst <= 0.05 * scale);
}

TEST_CASE("Llama learns to continue a repeated sequence", "[llama]") {
  tp::manual_seed(64);
  nn::Llama model(tiny(false));
  tp::optim::AdamW opt(model->parameters(), {.lr = 1e-2f});
  tp::Tensor idx = token_ids(2, 12, 19);
  std::vector<float> ids = idx.to_vector(), next(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) next[i] = std::fmod(ids[i] + 7.0f, 19.0f);
  tp::Tensor targets = tp::from_vector(next, {2, 12});
  float first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    tp::Tensor loss = tp::cross_entropy(model(idx).reshape({-1, 19}), targets.reshape({-1}));
    if (step == 0) first = loss.item();
    last = loss.item();
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
  CHECK(first == Approx(std::log(19.0)).epsilon(0.1));
  CHECK(last < 0.1f * first);
}

TEST_CASE("Llama refuses bad configurations and inputs, naming what is wrong", "[llama]") {
  auto with = [](auto change) {
    nn::LlamaConfig c = tiny(false);
    change(c);
    return c;
  };
  CHECK_THROWS_WITH(nn::Llama(with([](auto& c) { c.mlp_width = 0; })),
                    Catch::Contains("mlp_width must be positive"));
  CHECK_THROWS_WITH(nn::Llama(with([](auto& c) { c.n_kv_head = 3; })),
                    Catch::Contains("n_kv_head (3) must divide n_head (4)"));
  CHECK_THROWS_WITH(nn::Llama(with([](auto& c) { c.n_head = 16; })),
                    Catch::Contains("into an even head size"));
  CHECK_THROWS_WITH(nn::Llama(with([](auto& c) { c.rope_theta = 0.0f; })),
                    Catch::Contains("rope_theta must be positive"));
  nn::Llama model(tiny(false));
  CHECK_THROWS_WITH(model(token_ids(1, 13, 19)), Catch::Contains("exceeds context_length 12"));
  CHECK_THROWS_WITH(model(tp::ones({3})), Catch::Contains("expected token ids [B, T]"));
}
