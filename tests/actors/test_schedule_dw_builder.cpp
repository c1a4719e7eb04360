// Tests for dw_builder (pipeline_stage.h) under the schedules: the runners run once per W (or B)
// action of each stage, in the order the schedule runs them, and the gradients are unchanged.
#include <catch2/catch.hpp>
#include <map>
#include <mutex>

#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

constexpr int64_t kDim = 8;

/// Per stage: the microbatch of each runner, in the order the runners ran.
struct Recorder {
  std::mutex mutex;
  std::map<int, std::vector<int>> built;  // stage -> build ids in build order
  std::map<int, std::vector<int>> ran;    // stage -> build ids in run order
};

/// The microbatches of `stage`'s actions of the given kinds, in the order of the rank's order.
std::vector<int> microbatches_of(const sc::PipelineOrder& order, int stage,
                                 std::initializer_list<sc::ActionKind> kinds) {
  std::vector<int> out;
  auto visit = [&](const sc::Action& a) {
    for (sc::ActionKind k : kinds)
      if (a.kind == k && a.stage == stage) out.push_back(a.microbatch);
  };
  for (const sc::RankOrder& rank : order)
    for (const sc::Action& a : rank) {
      visit(a);
      for (const sc::Action& sub : a.sub_actions) visit(sub);
    }
  return out;
}

void check_runners_follow_the_order(sc::ScheduleKind kind) {
  const int n = 4;
  const int num_stages = sc::is_single_stage_per_rank(kind) ? 2 : 4;
  tp::manual_seed(11);
  Recorder rec;
  std::vector<std::shared_ptr<pp::PipelineStage>> stages;
  for (int i = 0; i < num_stages; ++i) {
    auto module = tp::nn::Sequential(tp::nn::Linear(kDim, kDim), tp::nn::ReLU()).ptr();
    auto stage = std::make_shared<pp::PipelineStage>(module, i, num_stages, tp::cpu(),
                                                     std::vector<tp::Tensor>{tp::zeros({2, kDim})});
    stage->set_dw_builder([&rec, i] {
      std::lock_guard lock(rec.mutex);
      int id = static_cast<int>(rec.built[i].size());
      rec.built[i].push_back(id);
      return [&rec, i, id] {
        std::lock_guard lock(rec.mutex);
        rec.ran[i].push_back(id);
      };
    });
    stages.push_back(stage);
  }
  pp::PipelineSchedule schedule(stages, n, tp::nn::mse_loss, kind);
  tp::Tensor x = tp::randn({2 * n, kDim}), y = tp::randn({2 * n, kDim});
  for (int step = 0; step < 2; ++step) {
    rec.built.clear();
    rec.ran.clear();
    schedule.step({x}, {.target = y});
    for (int s = 0; s < num_stages; ++s) {
      INFO(sc::schedule_name(kind) << " step " << step << " stage " << s);
      // Builds happen at I or B: build id k belongs to the k-th such action's microbatch.
      std::vector<int> builds = microbatches_of(
          schedule.order(), s, {sc::ActionKind::BackwardInput, sc::ActionKind::FullBackward});
      std::vector<int> runs = microbatches_of(
          schedule.order(), s, {sc::ActionKind::BackwardWeight, sc::ActionKind::FullBackward});
      REQUIRE(rec.built[s].size() == static_cast<size_t>(n));
      REQUIRE(rec.ran[s].size() == static_cast<size_t>(n));
      std::vector<int> ran_microbatches;
      for (int id : rec.ran[s]) ran_microbatches.push_back(builds.at(id));
      CHECK(ran_microbatches == runs);
    }
  }
}

}  // namespace

TEST_CASE("dw_builder's runners run once per W or B, in schedule order", "[schedule][dw]") {
  for (auto kind : sc::all_schedule_kinds()) {
    DYNAMIC_SECTION(sc::schedule_name(kind)) { check_runners_follow_the_order(kind); }
  }
}
