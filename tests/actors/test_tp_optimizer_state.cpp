// Tests for tensor_parallel/optimizer_state.h: a GPT trained 2 AdamW steps at tp 2 saves its
// gathered parameters and optimizer state to a file; loaded unsplit and at tp 4 (and tp 2 again)
// it trains on as the unsplit model trained straight through does.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "in_process_job.h"
#include "tensorplay/core/serialize.h"
#include "tensorplay/distributed/tensor_parallel/detail/shard.h"
#include "tensorplay/distributed/tensor_parallel/full_state_dict.h"
#include "tensorplay/distributed/tensor_parallel/model_plans.h"
#include "tensorplay/distributed/tensor_parallel/optimizer_state.h"
#include "tensorplay/distributed/tensor_parallel/parallelize_module.h"
#include "tensorplay/nn.h"
#include "tensorplay/optim.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace tpar = tensorplay::distributed::tensor_parallel;

namespace {

constexpr int64_t kVocab = 16, kTime = 8;
constexpr int kFirst = 2, kTotal = 4;  // steps before the checkpoint, steps in all
const tp::optim::AdamWOptions kAdam{.lr = 1e-2f, .eps = 1e-6f};

tp::nn::GPTConfig config() {
  return {.vocab_size = kVocab, .context_length = kTime, .n_layer = 2, .n_head = 4, .width = 32};
}

// The losses of steps [from, to) of `model` under `opt`.
std::vector<float> train(tp::nn::GPT& model, tp::optim::AdamW& opt, int from, int to) {
  std::vector<float> losses;
  for (int s = from; s < to; ++s) {
    tp::Generator gen(200 + s);
    const tp::Tensor all = tp::randint(0, kVocab, {2, kTime + 1}, {}, &gen);
    const tp::Tensor in = tp::narrow(all, 1, 0, kTime), target = tp::narrow(all, 1, 1, kTime);
    opt.zero_grad();
    tp::Tensor loss = tp::cross_entropy(model(in).reshape({-1, kVocab}), target.reshape({-1}));
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
  }
  return losses;
}

// The largest difference between `local` (a rank's parameters at tp `size`) and its share of
// `whole`.
float max_difference(tp::nn::GPT& local, const tp::StateDict& whole, int rank, int size) {
  float worst = 0.0f;
  for (const auto& [name, p] : local->named_parameters()) {
    tp::Tensor expected = tp::clone(*whole.find(name));
    if (auto spec = tpar::detail::shard_spec_of(p))
      tpar::detail::shard_in_place(expected, spec->dim, rank, size, spec->packed);
    if (expected.shape() != p.shape()) return INFINITY;
    const auto a = expected.to_vector(), b = p.to_vector();
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

struct Continued {
  std::vector<std::vector<float>> losses;  // per rank
  std::vector<float> worst;                // per rank, against the straight run's parameters
  std::vector<std::string> errors;
};

// Loads the checkpoint at `path` into a model of other initial weights split over `size` ranks
// (threads), trains the remaining steps, and compares with `straight`'s parameters.
Continued continue_at(int size, const std::string& path, const tp::StateDict& straight) {
  const tp::StateDict saved = tp::load_tensors(path);
  tp::StateDict model_state, optimizer_state;
  for (const auto& [key, t] : saved)
    (key.starts_with("model.") ? model_state : optimizer_state)
        .insert(key.substr(key.find('.') + 1), t);
  Continued out{std::vector<std::vector<float>>(size), std::vector<float>(size),
                std::vector<std::string>(size)};
  std::vector<tp::nn::GPT> models;
  for (int r = 0; r < size; ++r) {
    tp::manual_seed(99);  // other weights: the checkpoint must replace them
    models.emplace_back(config());
    models.back()->load_state_dict(model_state);
  }
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(r);
  auto outcomes = tp::testing::run_ranks(size, ranks, std::chrono::seconds(60), [&](auto& tpg) {
    const int me = tpg.rank();
    tpar::parallelize_module(*models[me], tpg, tpar::gpt_tp_plan(config(), size));
    tp::optim::AdamW opt(models[me]->parameters(), kAdam);
    tpar::load_full_optimizer_state_dict(opt, optimizer_state, tpg);
    out.losses[me] = train(models[me], opt, kFirst, kTotal);
    out.worst[me] = max_difference(models[me], straight, me, size);
  });
  for (int r = 0; r < size; ++r) out.errors[r] = outcomes[r].error;
  return out;
}

}  // namespace

TEST_CASE("optimizer state saved at tp 2 loads unsplit, at tp 2 and at tp 4 and trains on",
          "[tensor_parallel]") {
  // The unsplit model trained straight through: the losses and parameters to match.
  tp::manual_seed(3);
  tp::nn::GPT reference(config());
  tp::optim::AdamW ref_opt(reference->parameters(), kAdam);
  const std::vector<float> straight = train(reference, ref_opt, 0, kTotal);
  const tp::StateDict straight_params = reference->state_dict();

  // tp 2 for the first steps, then the gathered parameters and optimizer state to a file.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tp_optimizer_state_" + std::to_string(::getpid()) + ".tensors"))
                               .string();
  std::vector<tp::nn::GPT> models;
  for (int r = 0; r < 2; ++r) {
    tp::manual_seed(3);
    models.emplace_back(config());
  }
  std::vector<tp::StateDict> gathered(2);
  std::vector<int64_t> local_numel(2);
  auto saved = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(60), [&](auto& tpg) {
    const int me = tpg.rank();
    tpar::parallelize_module(*models[me], tpg, tpar::gpt_tp_plan(config(), 2));
    tp::optim::AdamW opt(models[me]->parameters(), kAdam);
    train(models[me], opt, 0, kFirst);
    for (const auto& [key, t] : opt.state_dict())
      if (key.ends_with(".exp_avg")) local_numel[me] += t.numel();
    tp::StateDict all;
    for (const auto& [key, t] : tpar::full_state_dict(*models[me], tpg))
      all.insert("model." + key, t);
    for (const auto& [key, t] : tpar::full_optimizer_state_dict(opt, tpg))
      all.insert("optimizer." + key, t);
    gathered[me] = all;
    if (me == 0) tp::save_tensors(all, path);
  });
  for (int r = 0; r < 2; ++r) REQUIRE(saved[r].error == "");
  // The state is the unsplit optimizer's: its exp_avg entries hold every parameter's elements.
  int64_t whole_numel = 0, gathered_numel = 0;
  for (const auto& p : reference->parameters()) whole_numel += p.numel();
  for (const auto& [key, t] : gathered[0])
    if (key.ends_with(".exp_avg")) gathered_numel += t.numel();
  CHECK(gathered_numel == whole_numel);
  CHECK(local_numel[0] < whole_numel);

  for (int size : {1, 2, 4}) {
    INFO("loaded at tp " << size);
    const Continued c = continue_at(size, path, straight_params);
    for (int r = 0; r < size; ++r) {
      INFO("rank " << r);
      REQUIRE(c.errors[r] == "");
      for (int s = 0; s < kTotal - kFirst; ++s)
        CHECK(c.losses[r][s] == Approx(straight[kFirst + s]).epsilon(1e-5));
      CHECK(c.worst[r] < 2e-5f);
    }
  }
  std::filesystem::remove(path);
}

TEST_CASE("optimizer state of another model is refused by name", "[tensor_parallel]") {
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(20), [&](auto& tpg) {
    tp::nn::GPT model(config());
    tpar::parallelize_module(*model, tpg, tpar::gpt_tp_plan(config(), 2));
    tp::optim::AdamW opt(model->parameters(), kAdam);
    size_t split = 0;  // the first split parameter (a block's c_attn weight)
    while (!tpar::detail::shard_spec_of(opt.parameters()[split])) ++split;
    tp::StateDict wrong;
    wrong.insert("state." + std::to_string(split) + ".exp_avg", tp::zeros({7, 32}));
    tpar::load_full_optimizer_state_dict(opt, wrong, tpg);
  });
  for (const auto& o : outcomes)
    CHECK_THAT(o.error, Catch::Contains(".exp_avg' has shape [7, 32]") &&
                            Catch::Contains("load the state of the same model"));
}
