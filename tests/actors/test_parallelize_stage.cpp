// Tests for tensor_parallel/parallelize_stage.h: a model plan applied stage by stage (ranks as
// threads of one process), the stage's share of a plan, and meshes that differ between ranks
// refused on every rank.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "in_process_job.h"
#include "tensorplay/distributed/tensor_parallel/detail/shard.h"
#include "tensorplay/distributed/tensor_parallel/model_plans.h"
#include "tensorplay/distributed/tensor_parallel/parallelize_stage.h"
#include "tensorplay/nn.h"
#include "tensorplay/optim.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace dist = tensorplay::distributed;
namespace tpar = tensorplay::distributed::tensor_parallel;

namespace {

constexpr int64_t kVocab = 16, kTime = 8;

tp::nn::LlamaConfig llama_config() {
  return {.vocab_size = kVocab,
          .context_length = kTime,
          .n_layer = 2,
          .n_head = 4,
          .n_kv_head = 2,
          .width = 32,
          .mlp_width = 64};
}

tp::nn::GPTConfig gpt_config() {
  return {.vocab_size = kVocab, .context_length = kTime, .n_layer = 2, .n_head = 4, .width = 32};
}

std::vector<std::string> paths(const tpar::ParallelizePlan& plan) {
  std::vector<std::string> out;
  for (const auto& e : plan) out.push_back(e.path);
  return out;
}

// The mesh {1, 1, 2} of a job joined in this process, seen from `world`'s rank.
dist::DeviceMesh mesh_of(const dist::ProcessGroup& world, std::vector<int> shape) {
  const dist::DeviceMesh job = world;
  return dist::DeviceMesh("cpu", std::move(shape), {"pp", "dp", "tp"}, world.rank())
      .with_job(job.job());
}

}  // namespace

TEST_CASE("plan_for_stage keeps the entries that name the stage's modules", "[tensor_parallel]") {
  tp::nn::GPT model(gpt_config());
  const auto plan = tpar::gpt_tp_plan(gpt_config(), 2, {.sequence_parallel = true});
  tp::nn::ModelStage first(model, 0, 1), last(model, 1, 2);
  CHECK(paths(tpar::plan_for_stage(*first, plan)) ==
        std::vector<std::string>{"blocks.*.attn.c_attn", "blocks.*.attn.c_proj",
                                 "blocks.*.mlp.c_fc", "blocks.*.mlp.c_proj", "drop",
                                 "blocks.*.ln_1", "blocks.*.ln_2"});
  CHECK(paths(tpar::plan_for_stage(*last, plan)) ==
        std::vector<std::string>{"blocks.*.attn.c_attn", "blocks.*.attn.c_proj",
                                 "blocks.*.mlp.c_fc", "blocks.*.mlp.c_proj", "blocks.*.ln_1",
                                 "blocks.*.ln_2", "ln_f", "lm_head"});
}

TEST_CASE("a Llama's two stages split over tp 2 train as the unsplit model", "[tensor_parallel]") {
  // Each rank runs both stages one after the other (no schedule): under sequence parallelism the
  // activation between them is the rank's sequence shard.
  const int steps = 3;
  auto batch = [](int step) {
    tp::Generator gen(40 + step);
    tp::Tensor x = tp::randint(0, kVocab, {2, kTime}, {}, &gen);
    return std::make_pair(x, tp::randint(0, kVocab, {2 * kTime}, {}, &gen));
  };
  auto loss_of = [](const tp::Tensor& logits, const tp::Tensor& t) {
    return tp::cross_entropy(logits.reshape({-1, kVocab}), t);
  };
  tp::manual_seed(7);
  tp::nn::Llama reference(llama_config());
  tp::optim::AdamW ref_opt(reference->parameters(), {.lr = 1e-2f, .eps = 1e-6f});
  std::vector<float> ref_losses;
  for (int s = 0; s < steps; ++s) {
    auto [x, t] = batch(s);
    ref_opt.zero_grad();
    tp::Tensor loss = loss_of(reference(x), t);
    loss.backward();
    ref_opt.step();
    ref_losses.push_back(loss.item());
  }
  std::vector<std::vector<float>> losses(2);
  std::vector<std::map<std::string, tp::Tensor>> params(2);
  std::vector<tp::Shape> between(2);
  // One copy of the model per rank and stage, as across processes, built here: the default
  // generator is the process's, so rank threads drawing from it at once would interleave.
  std::vector<std::vector<tp::nn::Llama>> copies(2);
  for (auto& rank_copies : copies)
    for (int s = 0; s < 2; ++s) {
      tp::manual_seed(7);
      rank_copies.emplace_back(llama_config());
    }
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(60), [&](auto& world) {
    const int me = world.rank();
    const auto mesh = mesh_of(world, {1, 1, 2});
    std::vector<tp::nn::ModelStage> stages;
    for (int s = 0; s < 2; ++s) {
      stages.emplace_back(copies[me][s], s, s + 1);
      tpar::parallelize_stage(*stages.back(), mesh,
                              tpar::llama_tp_plan(llama_config(), 2, {.sequence_parallel = true}));
    }
    std::vector<tp::Tensor> all;
    for (auto& st : stages)
      for (auto& p : st->parameters()) all.push_back(p);
    tp::optim::AdamW opt(all, {.lr = 1e-2f, .eps = 1e-6f});
    for (int s = 0; s < steps; ++s) {
      auto [x, t] = batch(s);
      opt.zero_grad();
      tp::Tensor h = stages[0](x);
      between[me] = h.shape();
      tp::Tensor loss = loss_of(stages[1](h), t);
      loss.backward();
      opt.step();
      losses[me].push_back(loss.item());
    }
    for (auto& st : stages)
      for (auto& [name, p] : st->named_parameters()) params[me][name] = tp::clone(p);
  });
  const auto whole = reference->named_parameters();
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    REQUIRE(outcomes[r].error == "");
    CHECK(between[r] == tp::Shape{2, kTime / 2, 32});  // a sequence shard crosses the boundary
    for (int s = 0; s < steps; ++s) CHECK(losses[r][s] == Approx(ref_losses[s]).epsilon(1e-5));
    REQUIRE(params[r].size() == whole.size());
    float worst = 0;
    for (const auto& [name, p] : whole) {
      tp::Tensor local = params[r].at(name), expected = tp::clone(p);
      for (int64_t d = 0; d < expected.dim(); ++d)
        if (expected.size(d) != local.size(d)) tpar::detail::shard_in_place(expected, d, r, 2);
      REQUIRE(expected.shape() == local.shape());
      const auto a = expected.to_vector(), b = local.to_vector();
      for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    }
    CHECK(worst < 2e-5f);
  }
}

TEST_CASE("a mesh whose tp dimension differs between ranks is refused on every rank",
          "[tensor_parallel]") {
  std::vector<tp::nn::GPT> models = {tp::nn::GPT(gpt_config()), tp::nn::GPT(gpt_config())};
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(20), [&](auto& world) {
    const int me = world.rank();
    const auto mesh = mesh_of(world, me == 0 ? std::vector{1, 1, 2} : std::vector{1, 2, 1});
    tp::nn::ModelStage stage(models[me], 0, 2);
    tpar::parallelize_stage(*stage, mesh, tpar::gpt_tp_plan(gpt_config(), 2));
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK_THAT(outcomes[r].error,
               Catch::Contains("the ranks built different meshes: rank 0 built") &&
                   Catch::Contains("rank 1 built DeviceMesh('cpu', [[[0], [1]]]") &&
                   Catch::Contains("pass the same shape and names to init_device_mesh"));
  }
  CHECK(models[0]->blocks->at<tp::nn::TransformerBlockImpl>(0)->mlp->c_fc->weight.size(0) ==
        4 * 32);  // nothing was split
  CHECK_THROWS_WITH(tpar::check_mesh_agrees(dist::DeviceMesh("cpu", {1, 1}, {"pp", "dp"}, 0)),
                    Catch::Contains("has no \"tp\" dimension"));
}
