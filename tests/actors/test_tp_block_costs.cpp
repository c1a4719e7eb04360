// Tests for tensor_parallel/block_costs.h: the collectives (calls and bytes) and parameter bytes
// predicted for a GPT and a Llama block equal what a block split over tp ranks (threads of one
// process) counts in one forward and backward, with and without sequence parallelism, with the
// Llama's key-value heads sharded (tp 2) and replicated (tp 4).
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "in_process_job.h"
#include "tensorplay/distributed/tensor_parallel/block_costs.h"
#include "tensorplay/distributed/tensor_parallel/functional.h"
#include "tensorplay/distributed/tensor_parallel/parallelize_stage.h"
#include "tensorplay/nn.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace dist = tensorplay::distributed;
namespace tpar = tensorplay::distributed::tensor_parallel;

namespace {

constexpr int64_t kBatch = 2, kTime = 8, kWidth = 32;

tp::nn::GPTConfig gpt_config() {
  return {.vocab_size = 16, .context_length = kTime, .n_layer = 3, .n_head = 4, .width = kWidth};
}

tp::nn::LlamaConfig llama_config() {
  return {.vocab_size = 16,
          .context_length = kTime,
          .n_layer = 3,
          .n_head = 4,
          .n_kv_head = 2,
          .width = kWidth,
          .mlp_width = 64};
}

struct Counted {
  int64_t calls = 0, bytes = 0, parameter_bytes = 0;
};

// What each of `size` ranks counts for block 1 of a model (a stage of that block alone) split by
// the model's plan: one forward and backward on its input (its sequence shard under sequence
// parallelism).
template <typename Model, typename Config>
std::vector<Counted> measure(const Config& config, int size, bool sequence_parallel,
                             const tpar::ParallelizePlan& plan) {
  std::vector<Counted> counted(size);
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(r);
  auto outcomes = tp::testing::run_ranks(size, ranks, std::chrono::seconds(60), [&](auto& w) {
    const int me = w.rank();
    const dist::DeviceMesh job = w;
    const auto mesh =
        dist::DeviceMesh("cpu", {1, 1, size}, {"pp", "dp", "tp"}, me).with_job(job.job());
    tp::manual_seed(1);
    Model model(config);
    tp::nn::ModelStage block(model, 1, 2);
    tpar::parallelize_stage(*block, mesh, plan);
    for (const auto& p : block->parameters())
      counted[me].parameter_bytes += p.numel() * static_cast<int64_t>(sizeof(float));
    const tp::Tensor x = tp::randn({kBatch, sequence_parallel ? kTime / size : kTime, kWidth});
    tpar::reset_collective_figures();
    tp::mean(tp::square(block(x))).backward();
    const tpar::CollectiveFigures f = tpar::collective_figures();
    counted[me].calls = f.calls;
    counted[me].bytes = f.bytes;
  });
  for (const auto& o : outcomes) REQUIRE(o.error == "");
  return counted;
}

void check(const std::vector<Counted>& counted, const tpar::BlockCosts& predicted) {
  for (size_t r = 0; r < counted.size(); ++r) {
    INFO("rank " << r);
    CHECK(counted[r].calls == predicted.collectives);
    CHECK(counted[r].bytes == predicted.collective_bytes);
    CHECK(counted[r].parameter_bytes == predicted.parameter_bytes);
  }
}

}  // namespace

TEST_CASE("a GPT block's predicted collectives and parameter bytes are what it counts",
          "[tensor_parallel]") {
  for (bool sp : {false, true}) {
    INFO("sequence parallel " << sp);
    const tpar::ModelPlanOptions options{.sequence_parallel = sp};
    const auto predicted = tpar::gpt_block_costs(gpt_config(), kBatch * kTime, 2, options);
    CHECK(predicted.collectives == (sp ? 14 : 4));
    check(measure<tp::nn::GPT>(gpt_config(), 2, sp, tpar::gpt_tp_plan(gpt_config(), 2, options)),
          predicted);
  }
}

TEST_CASE("a Llama block's predicted collectives and parameter bytes are what it counts",
          "[tensor_parallel]") {
  for (int size : {2, 4})  // key-value heads sharded at tp 2, replicated at tp 4
    for (bool sp : {false, true}) {
      INFO("tp " << size << ", sequence parallel " << sp);
      const tpar::ModelPlanOptions options{.sequence_parallel = sp};
      const auto predicted = tpar::llama_block_costs(llama_config(), kBatch * kTime, size, options);
      check(measure<tp::nn::Llama>(llama_config(), size, sp,
                                   tpar::llama_tp_plan(llama_config(), size, options)),
            predicted);
    }
}

TEST_CASE("block costs shrink with the tp degree and check their input", "[tensor_parallel]") {
  const auto one = tpar::gpt_block_costs(gpt_config(), 16, 1);
  const auto two = tpar::gpt_block_costs(gpt_config(), 16, 2);
  CHECK(one.collectives == 0);  // a group of one runs none
  CHECK(two.parameter_bytes < one.parameter_bytes);
  CHECK_THROWS_WITH(tpar::gpt_block_costs(gpt_config(), 0, 2),
                    Catch::Contains("tokens and element_bytes must be positive"));
  CHECK_THROWS_WITH(tpar::gpt_block_costs(gpt_config(), 16, 3),
                    Catch::Contains("tp 3 does not divide the heads"));
}
