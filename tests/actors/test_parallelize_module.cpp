// Tests for tensor_parallel/parallelize_module.h, model_plans.h and the styles (colwise, rowwise,
// replicated colwise): the GPT and the Llama split over 2 and 4 ranks (threads of one process,
// join_job) train as the unsplit model does, and bad plans are clear errors on every rank.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "in_process_job.h"
#include "tensorplay/distributed/tensor_parallel/colwise_parallel.h"
#include "tensorplay/distributed/tensor_parallel/detail/shard.h"
#include "tensorplay/distributed/tensor_parallel/loss_parallel.h"
#include "tensorplay/distributed/tensor_parallel/model_plans.h"
#include "tensorplay/distributed/tensor_parallel/parallelize_module.h"
#include "tensorplay/distributed/tensor_parallel/rowwise_parallel.h"
#include "tensorplay/nn.h"
#include "tensorplay/optim.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace tpar = tensorplay::distributed::tensor_parallel;

namespace {

constexpr int64_t kVocab = 16, kTime = 8, kBatch = 2;
constexpr int kSteps = 3;

// What one copy of a model did: its losses, then its parameters after the steps.
struct Trained {
  std::vector<float> losses;
  std::vector<std::pair<std::string, tp::Tensor>> params;
};

// Token ids (as float32) for step s: inputs and next-token targets.
std::pair<tp::Tensor, tp::Tensor> batch(int step) {
  std::mt19937 gen(1234 + step);
  std::vector<float> ids(kBatch * (kTime + 1));
  for (auto& id : ids) id = static_cast<float>(gen() % kVocab);
  std::vector<float> in, target;
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t t = 0; t < kTime; ++t) {
      in.push_back(ids[b * (kTime + 1) + t]);
      target.push_back(ids[b * (kTime + 1) + t + 1]);
    }
  return {tp::from_vector(in, {kBatch, kTime}), tp::from_vector(target, {kBatch * kTime})};
}

// The loss of the logits against the targets.
using LossFn = std::function<tp::Tensor(const tp::Tensor& logits, const tp::Tensor& targets)>;

tp::Tensor plain_loss(const tp::Tensor& logits, const tp::Tensor& targets) {
  return tp::cross_entropy(logits.reshape({-1, kVocab}), targets);
}

Trained train(tp::nn::Module& model, const LossFn& loss_of = plain_loss) {
  tp::optim::AdamW opt(model.parameters(), {.lr = 1e-2f});
  Trained out;
  for (int s = 0; s < kSteps; ++s) {
    auto [in, target] = batch(s);
    opt.zero_grad();
    tp::Tensor loss = loss_of(model(in), target);
    loss.backward();
    opt.step();
    out.losses.push_back(loss.item());
  }
  for (auto& [name, p] : model.named_parameters()) out.params.emplace_back(name, tp::clone(p));
  return out;
}

// The largest difference between a rank's parameters and its share of the reference's.
float max_param_difference(const Trained& rank_result, const Trained& reference, int rank,
                           int size) {
  std::map<std::string, tp::Tensor> whole(reference.params.begin(), reference.params.end());
  float worst = 0.0f;
  for (const auto& [name, local] : rank_result.params) {
    tp::Tensor expected = tp::clone(whole.at(name));
    for (int64_t d = 0; d < expected.dim(); ++d)
      if (expected.size(d) != local.size(d)) {
        const int64_t packed = name.find("c_attn") != std::string::npos ? 3 : 1;
        tpar::detail::shard_in_place(expected, d, rank, size, packed);
      }
    if (expected.shape() != local.shape()) return INFINITY;
    const auto a = expected.to_vector(), b = local.to_vector();
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

// Trains `size` tensor-parallel copies of make() (each split by `plan`) and the unsplit one, and
// checks they agree within float32 rounding.
template <typename Make>
void check_matches_unsplit(Make make, const tpar::ParallelizePlan& plan, int size,
                           bool loss_parallel = false) {
  tp::manual_seed(7);
  auto reference_model = make();
  const Trained reference = train(*reference_model);
  std::vector<decltype(make())> models;
  for (int r = 0; r < size; ++r) {
    tp::manual_seed(7);
    models.push_back(make());
  }
  std::vector<Trained> results(size);
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(r);
  auto outcomes = tp::testing::run_ranks(size, ranks, std::chrono::seconds(60), [&](auto& world) {
    const int me = world.rank();
    tpar::parallelize_module(*models[me], world, plan);
    results[me] = loss_parallel ? train(*models[me],
                                        [&world](const tp::Tensor& logits, const tp::Tensor& t) {
                                          return tpar::vocab_parallel_cross_entropy(
                                              logits.reshape({-1, logits.size(-1)}), t, world);
                                        })
                                : train(*models[me]);
  });
  for (int r = 0; r < size; ++r) {
    INFO("rank " << r);
    REQUIRE(outcomes[r].error == "");
    for (int s = 0; s < kSteps; ++s) {
      INFO("step " << s);
      CHECK(results[r].losses[s] == Approx(reference.losses[s]).epsilon(1e-5));
    }
    CHECK(results[r].params.size() == reference.params.size());
    CHECK(max_param_difference(results[r], reference, r, size) < 1e-4f);
  }
  // The split is real: a rank holds less than the whole model.
  int64_t whole = 0, local = 0;
  for (const auto& [name, p] : reference.params) whole += p.numel();
  for (const auto& [name, p] : results[0].params) local += p.numel();
  CHECK(local < whole);
}

tp::nn::GPTConfig gpt_config() {
  return {.vocab_size = kVocab, .context_length = kTime, .n_layer = 2, .n_head = 4, .width = 32};
}

tp::nn::LlamaConfig llama_config() {
  return {.vocab_size = kVocab,
          .context_length = kTime,
          .n_layer = 2,
          .n_head = 4,
          .n_kv_head = 2,
          .width = 32,
          .mlp_width = 64};
}

}  // namespace

TEST_CASE("a GPT split over 2 and 4 ranks trains as the unsplit one", "[tensor_parallel]") {
  for (int size : {2, 4}) {
    INFO("tp " << size);
    check_matches_unsplit([] { return tp::nn::GPT(gpt_config()); },
                          tpar::gpt_tp_plan(gpt_config(), size), size);
  }
}

TEST_CASE("a Llama with 2 key-value heads split over 2 and 4 ranks trains as the unsplit one",
          "[tensor_parallel]") {
  for (int size : {2, 4}) {  // tp 2 shards the key-value heads, tp 4 replicates them
    INFO("tp " << size);
    check_matches_unsplit([] { return tp::nn::Llama(llama_config()); },
                          tpar::llama_tp_plan(llama_config(), size), size);
  }
}

TEST_CASE(
    "a GPT with vocabulary-parallel tied embeddings and loss parallel trains as the unsplit one",
    "[tensor_parallel]") {
  for (int size : {2, 4}) {
    INFO("tp " << size << ", vocabulary parallel");
    check_matches_unsplit([] { return tp::nn::GPT(gpt_config()); },
                          tpar::gpt_tp_plan(gpt_config(), size, {.vocab_parallel = true}), size);
  }
  for (int size : {2, 4}) {
    INFO("tp " << size << ", loss parallel");
    check_matches_unsplit([] { return tp::nn::GPT(gpt_config()); },
                          tpar::gpt_tp_plan(gpt_config(), size, {.loss_parallel = true}), size,
                          /*loss_parallel=*/true);
  }
}

TEST_CASE(
    "a Llama with untied vocabulary-parallel embeddings and loss parallel trains as the unsplit "
    "one",
    "[tensor_parallel]") {
  check_matches_unsplit(
      [] { return tp::nn::Llama(llama_config()); },
      tpar::llama_tp_plan(llama_config(), 2, {.vocab_parallel = true, .loss_parallel = true}), 2,
      /*loss_parallel=*/true);
}

TEST_CASE("the GPT and the Llama under sequence parallelism train as the unsplit ones",
          "[tensor_parallel]") {
  for (int size : {2, 4}) {
    INFO("GPT, tp " << size);
    check_matches_unsplit([] { return tp::nn::GPT(gpt_config()); },
                          tpar::gpt_tp_plan(gpt_config(), size, {.sequence_parallel = true}), size);
    INFO("Llama, tp " << size);
    check_matches_unsplit([] { return tp::nn::Llama(llama_config()); },
                          tpar::llama_tp_plan(llama_config(), size, {.sequence_parallel = true}),
                          size);
  }
  INFO("GPT and Llama, tp 2, keeping the input shards");
  check_matches_unsplit(
      [] { return tp::nn::GPT(gpt_config()); },
      tpar::gpt_tp_plan(gpt_config(), 2, {.sequence_parallel = true, .keep_input_shards = true}),
      2);
  check_matches_unsplit([] { return tp::nn::Llama(llama_config()); },
                        tpar::llama_tp_plan(llama_config(), 2,
                                            {.sequence_parallel = true, .keep_input_shards = true}),
                        2);
  INFO("GPT, tp 2, with vocabulary parallel and loss parallel");
  check_matches_unsplit(
      [] { return tp::nn::GPT(gpt_config()); },
      tpar::gpt_tp_plan(gpt_config(), 2, {.loss_parallel = true, .sequence_parallel = true}), 2,
      /*loss_parallel=*/true);
  INFO("Llama, tp 4, with vocabulary parallel and loss parallel");
  check_matches_unsplit(
      [] { return tp::nn::Llama(llama_config()); },
      tpar::llama_tp_plan(
          llama_config(), 4,
          {.vocab_parallel = true, .loss_parallel = true, .sequence_parallel = true}),
      4, /*loss_parallel=*/true);
}

TEST_CASE("a GPT on a {pp 1, dp 2, tp 2} mesh, its replicas averaged, trains as the unsplit one",
          "[tensor_parallel]") {
  tp::manual_seed(7);
  tp::nn::GPT reference_model(gpt_config());
  const Trained reference = train(*reference_model);
  std::vector<tp::nn::GPT> models;
  for (int r = 0; r < 4; ++r) {
    tp::manual_seed(7);
    models.emplace_back(gpt_config());
  }
  std::vector<Trained> results(4);
  auto outcomes = tp::testing::run_ranks(4, {0, 1, 2, 3}, std::chrono::seconds(60), [&](auto& w) {
    const int me = w.rank();
    const tp::distributed::DeviceMesh job = w;
    const auto mesh =
        tp::distributed::DeviceMesh("cpu", {1, 2, 2}, {"pp", "dp", "tp"}, me).with_job(job.job());
    const tp::distributed::ProcessGroup dp = mesh["dp"];
    auto& model = *models[me];
    tpar::parallelize_module(model, mesh["tp"], tpar::gpt_tp_plan(gpt_config(), 2));
    // Each replica takes its half of the batch; the gradients are averaged over dp.
    const int64_t half = mesh.get_local_rank("dp");
    tp::optim::AdamW opt(model.parameters(), {.lr = 1e-2f});
    for (int s = 0; s < kSteps; ++s) {
      auto [in, target] = batch(s);
      opt.zero_grad();
      tp::Tensor loss =
          plain_loss(model(tp::narrow(in, 0, half, 1)), tp::narrow(target, 0, half * kTime, kTime));
      loss.backward();
      for (auto& p : model.parameters()) {
        tp::Tensor g = p.grad();
        dp.all_reduce(g);
        g.copy_(g * 0.5f);
      }
      opt.step();
      tp::Tensor total = loss.detach() * 0.5f;
      dp.all_reduce(total);
      results[me].losses.push_back(total.item());
    }
    for (auto& [name, p] : model.named_parameters())
      results[me].params.emplace_back(name, tp::clone(p));
  });
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    REQUIRE(outcomes[r].error == "");
    for (int s = 0; s < kSteps; ++s)
      CHECK(results[r].losses[s] == Approx(reference.losses[s]).epsilon(1e-5));
    CHECK(max_param_difference(results[r], reference, r % 2, 2) < 1e-4f);
  }
}

TEST_CASE("a Linear's bias under RowwiseParallel is added once", "[tensor_parallel]") {
  auto make = [] {
    auto model = tp::nn::Sequential();
    model->push_back(tp::nn::Embedding(kVocab, 8));
    model->push_back(tp::nn::Linear(8, 12));
    model->push_back(tp::nn::Linear(12, kVocab));
    return model;
  };
  check_matches_unsplit(make, {{"1", tpar::ColwiseParallel()}, {"2", tpar::RowwiseParallel()}}, 2);
}

TEST_CASE("bad tensor-parallel plans are clear errors on every rank", "[tensor_parallel]") {
  auto run_both = [](const std::function<void(tp::distributed::ProcessGroup&)>& work) {
    auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(20), work);
    std::vector<std::string> errors;
    for (auto& o : outcomes) errors.push_back(o.error);
    return errors;
  };
  std::vector<tp::nn::GPT> gpts;
  for (int r = 0; r < 2; ++r) gpts.emplace_back(gpt_config());

  SECTION("a plan naming a module that does not exist") {
    const tpar::ParallelizePlan plan = {{"blocks.*.attn.q_proj", tpar::ColwiseParallel()}};
    for (const auto& e :
         run_both([&](auto& w) { tpar::parallelize_module(*gpts[w.rank()], w, plan); })) {
      CHECK_THAT(e, Catch::Contains("'blocks.*.attn.q_proj', which matches no module") &&
                        Catch::Contains("c_attn, c_proj"));
    }
  }
  SECTION("a column-parallel layer whose output width tp does not divide") {
    std::vector<tp::nn::Linear> layers = {tp::nn::Linear(4, 3), tp::nn::Linear(4, 3)};
    for (const auto& e : run_both([&](auto& w) {
           auto root = tp::nn::Sequential();
           root->push_back(layers[w.rank()]);
           tpar::parallelize_module(*root, w, {{"0", tpar::ColwiseParallel()}});
         })) {
      CHECK_THAT(e, Catch::Contains("'0' has output features 3, which 2 ranks do not divide"));
    }
    CHECK(layers[0]->weight.size(0) == 3);  // nothing was changed
  }
  SECTION("ranks given different plans") {
    for (const auto& e : run_both([&](auto& w) {
           tpar::ParallelizePlan plan = tpar::gpt_tp_plan(gpt_config(), 2);
           if (w.rank() == 1) plan.pop_back();
           tpar::parallelize_module(*gpts[w.rank()], w, plan);
         })) {
      CHECK_THAT(e, Catch::Contains("another group or plan"));
    }
  }
  SECTION("a tp group that differs between ranks") {
    // Rank 1 splits over a group of its own: rank 0, in a group of both, is told it never came.
    // (Rank 1 sees nothing wrong: its group of one agrees with itself.)
    auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(3), [&](auto& w) {
      const auto group = w.rank() == 0 ? w : w.new_group({1});
      tpar::parallelize_module(*gpts[w.rank()], group, tpar::gpt_tp_plan(gpt_config(), 2));
    });
    CHECK_THAT(outcomes[0].error, Catch::Contains("rank(s) [1] did not take part"));
    CHECK(outcomes[1].error == "");
  }
  SECTION("a style on a module it cannot split") {
    for (const auto& e : run_both([&](auto& w) {
           tpar::parallelize_module(*gpts[w.rank()], w,
                                    {{"blocks.0.attn", tpar::RowwiseParallel()}});
         })) {
      CHECK_THAT(e, Catch::Contains("'blocks.0.attn' is a CausalSelfAttention"));
    }
  }
}

TEST_CASE("model plans check the tp degree", "[tensor_parallel]") {
  CHECK_THROWS_WITH(tpar::gpt_tp_plan(gpt_config(), 3),
                    Catch::Contains("tp 3 does not divide the heads (4)"));
  auto llama = llama_config();
  llama.n_head = 12;
  llama.n_kv_head = 3;
  CHECK_THROWS_WITH(tpar::llama_tp_plan(llama, 2),
                    Catch::Contains("3 key-value heads neither divide nor are divided by tp 2"));
  CHECK_THROWS_WITH(tpar::llama_tp_plan(llama_config(), 3),
                    Catch::Contains("tp 3 does not divide the heads"));
  CHECK(tpar::llama_tp_plan(llama_config(), 4).size() == 7);
  CHECK(tpar::match_modules(*tp::nn::GPT(gpt_config()), "blocks.*.mlp.c_fc").size() == 2);
}
