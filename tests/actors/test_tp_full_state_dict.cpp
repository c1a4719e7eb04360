// Tests for tensor_parallel/full_state_dict.h: a GPT trained at tp 2 gathers the unsplit model's
// state dict, which loads unsplit and at tp 4 and computes the same loss there; a Llama read from
// a Hugging Face folder splits by the Llama's plan and gathers back to the folder's tensors.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "in_process_job.h"
#include "tensorplay/distributed/tensor_parallel/full_state_dict.h"
#include "tensorplay/distributed/tensor_parallel/model_plans.h"
#include "tensorplay/distributed/tensor_parallel/parallelize_module.h"
#include "tensorplay/nn.h"
#include "tensorplay/optim.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace tpar = tensorplay::distributed::tensor_parallel;

namespace {

constexpr int64_t kVocab = 16, kTime = 8;

tp::nn::GPTConfig config() {
  return {.vocab_size = kVocab, .context_length = kTime, .n_layer = 2, .n_head = 4, .width = 32};
}

tp::Tensor ids(int seed) {
  tp::manual_seed(100 + seed);
  return tp::randint(0, kVocab, {2, kTime + 1});
}

tp::Tensor loss_of(tp::nn::GPT& model, int seed) {
  const tp::Tensor all = ids(seed);
  const tp::Tensor in = tp::narrow(all, 1, 0, kTime), target = tp::narrow(all, 1, 1, kTime);
  return tp::cross_entropy(model(in).reshape({-1, kVocab}), target.reshape({-1}));
}

float max_difference(const tp::StateDict& a, const tp::StateDict& b) {
  float worst = 0.0f;
  for (const auto& [name, t] : a) {
    const tp::Tensor* other = b.find(name);
    if (other == nullptr || other->shape() != t.shape()) return INFINITY;
    const auto x = t.to_vector(), y = other->to_vector();
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  }
  return a.size() == b.size() ? worst : INFINITY;
}

}  // namespace

TEST_CASE("a state dict gathered at tp 2 loads unsplit and at tp 4", "[tensor_parallel]") {
  const tpar::ModelPlanOptions split_all{.vocab_parallel = true};
  // The unsplit model, trained 2 steps: the state dict to match.
  tp::manual_seed(3);
  tp::nn::GPT reference(config());
  {
    tp::optim::AdamW opt(reference->parameters(), {.lr = 1e-2f});
    for (int s = 0; s < 2; ++s) {
      opt.zero_grad();
      loss_of(reference, s).backward();
      opt.step();
    }
  }
  const tp::StateDict whole = reference->state_dict();
  const float next_loss = loss_of(reference, 2).item();

  // The same at tp 2, each rank gathering the state dict.
  std::vector<tp::nn::GPT> models;
  for (int r = 0; r < 2; ++r) {
    tp::manual_seed(3);
    models.emplace_back(config());
  }
  std::vector<tp::StateDict> gathered(2);
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(60), [&](auto& world) {
    auto& model = models[world.rank()];
    tpar::parallelize_module(*model, world, tpar::gpt_tp_plan(config(), 2, split_all));
    tp::optim::AdamW opt(model->parameters(), {.lr = 1e-2f});
    for (int s = 0; s < 2; ++s) {
      opt.zero_grad();
      loss_of(model, s).backward();
      opt.step();
    }
    gathered[world.rank()] = tpar::full_state_dict(*model, world);
  });
  for (const auto& o : outcomes) REQUIRE(o.error == "");
  for (const auto& g : gathered) CHECK(max_difference(g, whole) < 1e-4f);

  // Unsplit: the gathered dict computes the reference's next loss.
  tp::nn::GPT unsplit(config());
  unsplit->load_state_dict(gathered[0]);
  CHECK(loss_of(unsplit, 2).item() == Approx(next_loss).epsilon(1e-5));

  // At tp 4: loaded unsplit, then split.
  std::vector<tp::nn::GPT> wide;
  for (int r = 0; r < 4; ++r) {
    wide.emplace_back(config());
    wide.back()->load_state_dict(gathered[0]);
  }
  std::vector<float> losses(4);
  outcomes = tp::testing::run_ranks(4, {0, 1, 2, 3}, std::chrono::seconds(60), [&](auto& world) {
    auto& model = wide[world.rank()];
    tpar::parallelize_module(*model, world, tpar::gpt_tp_plan(config(), 4, split_all));
    losses[world.rank()] = loss_of(model, 2).item();
  });
  for (const auto& o : outcomes) REQUIRE(o.error == "");
  for (float l : losses) CHECK(l == Approx(next_loss).epsilon(1e-5));
  CHECK(wide[0]->wte->weight.size(0) == kVocab / 4);  // split for real
}

TEST_CASE("a Llama read from a Hugging Face folder takes the Llama's plan and saves whole",
          "[tensor_parallel]") {
  const tp::nn::LlamaConfig config{.vocab_size = kVocab,
                                   .context_length = kTime,
                                   .n_layer = 2,
                                   .n_head = 4,
                                   .n_kv_head = 2,
                                   .width = 32,
                                   .mlp_width = 64};
  const std::string folder =
      (std::filesystem::temp_directory_path() / ("tp_llama_" + std::to_string(::getpid())))
          .string();
  tp::manual_seed(11);
  tp::nn::Llama reference(config);
  tp::nn::save_pretrained(reference, folder);
  const tp::Tensor all = ids(0);
  const tp::Tensor in = tp::narrow(all, 1, 0, kTime), target = tp::narrow(all, 1, 1, kTime);
  auto loss_of_llama = [&](tp::nn::Llama& m) {
    return tp::cross_entropy(m(in).reshape({-1, kVocab}), target.reshape({-1})).item();
  };
  const float expected = loss_of_llama(reference);

  std::vector<tp::nn::Llama> models;
  for (int r = 0; r < 2; ++r) models.push_back(tp::nn::llama_from_pretrained(folder));
  std::vector<float> losses(2);
  std::vector<tp::StateDict> gathered(2);
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(60), [&](auto& world) {
    auto& model = models[world.rank()];
    tpar::parallelize_module(*model, world, tpar::llama_tp_plan(model->config(), 2));
    losses[world.rank()] = loss_of_llama(model);
    gathered[world.rank()] = tpar::full_state_dict(*model, world);
  });
  std::filesystem::remove_all(folder);
  for (int r = 0; r < 2; ++r) {
    REQUIRE(outcomes[r].error == "");
    CHECK(losses[r] == Approx(expected).epsilon(1e-5));
    CHECK(max_difference(gathered[r], reference->state_dict()) == 0.0f);
  }
  // Split for real: 2 of the 4 query heads of 8 channels.
  CHECK(models[0]->find_tensor("layers.0.self_attn.q_proj.weight").size(0) == 16);
}

TEST_CASE("a gathered state dict loads into a model split at another tp degree",
          "[tensor_parallel]") {
  // The whole state of a GPT (vocabulary parallel: the tied embedding split too).
  const tpar::ModelPlanOptions split_all{.vocab_parallel = true};
  tp::manual_seed(3);
  tp::nn::GPT source(config());
  const tp::StateDict whole = source->state_dict();
  std::vector<tp::nn::GPT> models;
  for (int r = 0; r < 4; ++r) {
    tp::manual_seed(50);  // other weights: the load must replace them
    models.emplace_back(config());
  }
  std::vector<float> worst(4, INFINITY);
  std::vector<int64_t> local(4);
  auto outcomes = tp::testing::run_ranks(4, {0, 1, 2, 3}, std::chrono::seconds(60), [&](auto& w) {
    const int me = w.rank();
    tpar::parallelize_module(*models[me], w, tpar::gpt_tp_plan(config(), 4, split_all));
    tpar::load_full_state_dict(*models[me], whole, w);
    for (const auto& p : models[me]->parameters()) local[me] += p.numel();
    worst[me] = max_difference(tpar::full_state_dict(*models[me], w), whole);
  });
  int64_t total = 0;
  for (const auto& p : source->parameters()) total += p.numel();
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    REQUIRE(outcomes[r].error == "");
    CHECK(worst[r] == 0.0f);
    CHECK(local[r] < total);
  }
}
