// Tests for memory_profile.h: one microbatch's bytes measured on a stage, the costs built from
// them, and the simulator's prediction from those costs against a measured step.
#include <algorithm>
#include <catch2/catch.hpp>

#include "tensorplay/pipelining/runtime/memory_profile.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/schedules/simulator.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

constexpr int64_t kDim = 64;
constexpr int64_t kRows = 32;
constexpr int kStages = 4;
constexpr int kMicrobatches = 8;

std::vector<std::shared_ptr<pp::PipelineStage>> make_stages(const std::string& recompute) {
  tp::manual_seed(3);
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  for (int i = 0; i < kStages; ++i) {
    auto module = tp::nn::Sequential(tp::nn::Sequential(tp::nn::Linear(kDim, kDim), tp::nn::GELU()),
                                     tp::nn::Sequential(tp::nn::Linear(kDim, kDim), tp::nn::GELU()))
                      .ptr();
    stages.push_back(std::make_shared<pp::PipelineStage>(
        module, i, kStages, tp::cpu(), std::vector<tp::Tensor>{tp::zeros({kRows, kDim})}));
    stages.back()->set_recompute(pp::RecomputePolicy::parse(recompute));
  }
  return stages;
}

std::vector<pp::StageMemoryProfile> profile(
    const std::vector<std::shared_ptr<pp::PipelineStage>>& stages) {
  std::vector<pp::StageMemoryProfile> out;
  for (auto& s : stages)
    out.push_back(pp::profile_stage_memory(
        *s, {.loss_fn = tp::nn::mse_loss, .target = tp::zeros({kRows, kDim})}));
  return out;
}

}  // namespace

TEST_CASE("a stage's profile measures what a microbatch keeps, and leaves the stage as it was",
          "[memory_profile]") {
  auto stages = make_stages("none");
  auto profiles = profile(stages);
  const int64_t tensor = kRows * kDim * 4;  // one [32, 64] float32 activation
  for (const auto& p : profiles) {
    INFO("stage " << p.stage);
    // Each Linear keeps its input and each GELU its input: four activations, the stage's input
    // among them (its maker keeps only its history), except on the first stage, whose input is
    // data. The output is sent on.
    CHECK(p.activation_bytes >= 3 * tensor);
    CHECK(p.activation_bytes <= 5 * tensor + 16);  // the last stage: its loss too
    if (p.stage < kStages - 1) {
      CHECK(p.activation_bytes == (p.stage == 0 ? 3 : 4) * tensor);
      CHECK(p.sent_bytes == tensor);
    }
    CHECK(p.parameter_bytes == 2 * (kDim * kDim + kDim) * 4);
  }
  CHECK(profiles.back().retained_bytes == tensor);  // the last stage's output stays with the step
  CHECK(profiles.back().sent_bytes == 0);
  for (auto& s : stages) {
    CHECK(s->stashed_microbatches() == 0);
    for (const auto& p : s->module().parameters()) CHECK_FALSE(p.grad().defined());
  }
}

TEST_CASE("full recomputation shrinks what the profile says F keeps", "[memory_profile]") {
  auto plain = profile(make_stages("none"));
  auto recomputed = profile(make_stages("full"));
  for (size_t s = 0; s < plain.size(); ++s)
    CHECK(recomputed[s].activation_bytes < plain[s].activation_bytes);
  // Block 1's input stays; block 0's input is the stage's input, and the stage's output goes on
  // to the next stage (the stage keeps only its history).
  CHECK(recomputed[0].activation_bytes == kRows * kDim * 4);
}

TEST_CASE("the last stage's profile needs its loss and target", "[memory_profile]") {
  auto stages = make_stages("none");
  CHECK_THROWS_WITH(pp::profile_stage_memory(*stages.back()),
                    Catch::Contains("needs the loss function"));
  CHECK_THROWS_WITH(pp::memory_costs_from({}), Catch::Contains("no stage profiles"));
}

TEST_CASE("the simulator's prediction from profiles is close to the measured step",
          "[memory_profile]") {
  for (auto kind : {sc::ScheduleKind::GPipe, sc::ScheduleKind::OneFOneB}) {
    INFO(sc::schedule_name(kind));
    auto stages = make_stages("none");
    sc::CostModel costs = sc::CostModel::uniform(1, 1, 1);
    costs.memory = pp::memory_costs_from(profile(stages));
    pp::PipelineSchedule schedule(stages, kMicrobatches, tp::nn::mse_loss, kind);
    tp::Tensor x = tp::randn({kRows * kMicrobatches, kDim});
    tp::Tensor y = tp::randn({kRows * kMicrobatches, kDim});
    schedule.step({x}, {.target = y});
    const pp::MemoryStats measured = schedule.memory_stats();
    const sc::SimulationResult predicted = sc::simulate_order(
        schedule.order(), sc::stage_to_rank(kind, kStages, 1), kMicrobatches, costs);
    for (int r = 0; r < kStages; ++r) {
      INFO("rank " << r << ": measured " << measured.ranks[r].peak_activation_bytes
                   << ", predicted " << predicted.peak_activation_bytes[r]);
      const double m = static_cast<double>(measured.ranks[r].peak_activation_bytes);
      // GPipe's forwards here take microseconds, less than a message's way to the next rank:
      // outputs pile up on their way (up to one per microbatch, as the threads happen to run),
      // which a simulation with uniform costs does not see. 1F1B's ranks each wait for the
      // others, and each action is charged its own workspace: within 10% (one output more or
      // less on its way, as the threads happen to run).
      const double within = kind == sc::ScheduleKind::GPipe ? 0.20 : 0.10;
      CHECK(predicted.peak_activation_bytes[r] == Approx(m).epsilon(within));
    }
  }
}

TEST_CASE("outputs the loss holds on to are the last stage's until its backward, returned or not",
          "[memory_profile]") {
  // A loss that saves its input (out * out): the last stage's graph holds each microbatch's
  // output until its backward, whether the step returns the outputs or not.
  const pp::LossFn holding = [](const tp::Tensor& out, const tp::Tensor& target) {
    return tp::nn::mse_loss(out * out, target);
  };
  const int64_t tensor = kRows * kDim * 4;
  auto stages = make_stages("none");
  std::vector<pp::StageMemoryProfile> profiles;
  for (auto& s : stages)
    profiles.push_back(
        pp::profile_stage_memory(*s, {.loss_fn = holding, .target = tp::zeros({kRows, kDim})}));
  CHECK(profiles.back().retained_bytes == tensor);
  CHECK(profiles.back().retained_kept_bytes == tensor);
  CHECK(profile(make_stages("none")).back().retained_kept_bytes == 0);  // mse_loss keeps a copy
  const sc::MemoryCosts returned = pp::memory_costs_from(profiles);
  const sc::MemoryCosts not_returned = pp::memory_costs_from(profiles, 0, false);
  CHECK(not_returned.retained_bytes.back() == 0);
  CHECK(not_returned.activation_bytes.back() == returned.activation_bytes.back() + tensor);
  // GPipe: every F before the first backward, so the last rank holds every microbatch's output.
  for (bool outputs : {true, false}) {
    INFO((outputs ? "outputs returned" : "no outputs returned"));
    auto run = make_stages("none");
    pp::PipelineSchedule schedule(run, kMicrobatches, holding, sc::ScheduleKind::GPipe);
    tp::Tensor x = tp::randn({kRows * kMicrobatches, kDim});
    tp::Tensor y = tp::randn({kRows * kMicrobatches, kDim});
    schedule.step({x}, {.target = y, .return_outputs = outputs});
    sc::CostModel costs = sc::CostModel::uniform(1, 1, 1);
    costs.memory = outputs ? returned : not_returned;
    const sc::SimulationResult predicted =
        sc::simulate_order(schedule.order(), sc::stage_to_rank(sc::ScheduleKind::GPipe, kStages, 1),
                           kMicrobatches, costs);
    const double m =
        static_cast<double>(schedule.memory_stats().ranks.back().peak_activation_bytes);
    INFO("last rank: measured " << m << ", predicted " << predicted.peak_activation_bytes.back());
    CHECK(predicted.peak_activation_bytes.back() == Approx(m).epsilon(0.05));
  }
}

TEST_CASE("a byte cap between one and two microbatches holds in a real step", "[memory_profile]") {
  auto stages = make_stages("none");
  const sc::MemoryCosts costs = pp::memory_costs_from(profile(stages));
  const std::vector<double> kept = costs.kept_per_stage(kStages);
  const std::vector<double> sent = costs.sent_per_stage(kStages);
  const std::vector<double> workspace = costs.workspace_per_stage(kStages);
  double one = 0;  // what one microbatch needs at its peak on the worst rank
  for (int s = 0; s < kStages; ++s) one = std::max(one, kept[s] + sent[s] + workspace[s]);
  const double cap = 1.5 * one;
  sc::DynamicPolicyOptions policy;
  policy.split_backward = false;
  policy.cap_activation_bytes(cap, costs, kStages);
  pp::ScheduleOptions options;
  options.policy = sc::dynamic_policies(policy);
  pp::Schedule1F1B schedule(stages, kMicrobatches, tp::nn::mse_loss, options);
  tp::Tensor x = tp::randn({kRows * kMicrobatches, kDim});
  tp::Tensor y = tp::randn({kRows * kMicrobatches, kDim});
  std::vector<tp::Tensor> losses;
  // The outputs a step returns are the caller's and not capped: ask for none.
  schedule.step({x}, {.target = y, .losses = &losses, .return_outputs = false});
  CHECK(losses.size() == kMicrobatches);  // the step completes
  const pp::MemoryStats stats = schedule.memory_stats();
  for (int r = 0; r < kStages; ++r) {
    INFO("rank " << r << ": measured " << stats.ranks[r].peak_activation_bytes << ", cap " << cap);
    CHECK(stats.ranks[r].peak_activation_bytes <= cap);
  }
  // Without the cap the first rank holds more.
  pp::Schedule1F1B free(make_stages("none"), kMicrobatches, tp::nn::mse_loss);
  free.step({x}, {.target = y, .return_outputs = false});
  CHECK(free.memory_stats().ranks[0].peak_activation_bytes > cap);
}
