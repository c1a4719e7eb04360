// Tests for memory_costs.h and memory_model.h: each rank's predicted peak bytes, checked against
// peaks computed by hand, and against the simulator's count of stashed microbatches.
#include <algorithm>
#include <catch2/catch.hpp>
#include <stdexcept>

#include "tensorplay/schedules/memory_model.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/schedules/simulator.h"
#include "tensorplay/schedules/timeline_export.h"

using namespace tensorplay::schedules;

namespace {

SimulationResult run(ScheduleKind kind, int p, int v, int m, const CostModel& costs) {
  return simulate_order(generate_order(kind, p, v, m), stage_to_rank(kind, p, v), m, costs);
}

CostModel with_bytes(double activation, double fixed) {
  CostModel costs = CostModel::uniform(1, 1, 1);
  costs.memory.activation_bytes = {activation};
  costs.memory.weight_stash_bytes = {activation};  // I keeps everything until W
  costs.memory.fixed_bytes = {fixed};
  return costs;
}

/// Every stage recomputes: its F keeps `inputs` bytes, its backward rebuilds `activation`.
CostModel recomputing(double activation, double inputs) {
  CostModel costs = with_bytes(activation, 0);
  costs.memory.recompute_activation_bytes = {inputs};
  costs.memory.weight_stash_bytes = {0};
  costs.memory.recompute = {1};
  return costs;
}

}  // namespace

TEST_CASE("memory model: 1F1B's first rank holds p microbatches, the last one", "[memory_model]") {
  const int p = 4;
  const int m = 8;
  SimulationResult r = run(ScheduleKind::OneFOneB, p, 1, m, with_bytes(100, 10));
  REQUIRE(r.peak_bytes.size() == p);
  for (int rank = 0; rank < p; ++rank) {
    INFO("rank " << rank);
    CHECK(r.peak_activation_bytes[rank] == 100.0 * (p - rank));
    CHECK(r.peak_bytes[rank] == 10.0 + 100.0 * (p - rank));
  }
}

TEST_CASE("memory model: GPipe holds every microbatch on every rank", "[memory_model]") {
  SimulationResult r = run(ScheduleKind::GPipe, 3, 1, 6, with_bytes(50, 0));
  for (double peak : r.peak_bytes) CHECK(peak == 300.0);
}

TEST_CASE("memory model: recomputation keeps inputs and rebuilds one microbatch during B",
          "[memory_model]") {
  const int p = 4;
  CostModel costs = recomputing(100, 20);
  SimulationResult r = run(ScheduleKind::OneFOneB, p, 1, 8, costs);
  // Rank r holds p - r microbatches' inputs (20 each) when its first B rebuilds 100 bytes; the
  // last rank, whose every F comes right before its own B, keeps its 100 bytes and rebuilds
  // nothing, even with no recomputation time given.
  for (int rank = 0; rank + 1 < p; ++rank)
    CHECK(r.peak_activation_bytes[rank] == 20.0 * (p - rank) + 100);
  CHECK(r.peak_activation_bytes[p - 1] == 100.0);
  costs.memory.recompute = {0, 0, 0, 1};  // only the last stage recomputes
  SimulationResult mixed = run(ScheduleKind::OneFOneB, p, 1, 8, costs);
  CHECK(mixed.peak_activation_bytes[0] == 400.0);
  CHECK(mixed.peak_activation_bytes[3] == 100.0);
}

TEST_CASE("memory model: an F that keeps its activations for its backward right after",
          "[memory_model]") {
  // With the recomputation's time given, 1F1B's last rank (each F right before its B) keeps
  // each microbatch's 100 bytes instead of its 20-byte input and rebuilds nothing: 100, not 120.
  const int p = 4;
  CostModel costs = recomputing(100, 20);
  costs.input_backward = {2};
  costs.recompute = {1};
  SimulationResult r = run(ScheduleKind::OneFOneB, p, 1, 8, costs);
  CHECK(r.peak_activation_bytes[3] == 100.0);
  CHECK(r.peak_activation_bytes[0] == 20.0 * p + 100);  // its Fs run ahead of its Bs: rebuilt
  int kept = 0;
  for (const TimelineEvent& e : r.timeline) kept += e.kept_activations ? 1 : 0;
  CHECK(kept == 2 * 8);  // the last rank's 8 Fs and their Bs
}

TEST_CASE("memory model: a stage of several segments recomputes before its own backward too",
          "[memory_model]") {
  // 1F1B's last rank: each F right before its B. With keep_before_backward 0 its F keeps the
  // 20-byte inputs and its B holds what it measured rebuilding (50: one segment at a time, not
  // the 100 bytes of every segment at once): 70, not 100.
  const int p = 4;
  CostModel costs = recomputing(100, 20);
  costs.memory.keep_before_backward = {0};
  costs.memory.recompute_full_backward_transient_bytes = {50};
  costs.memory.recompute_input_transient_bytes = {50};
  SimulationResult r = run(ScheduleKind::OneFOneB, p, 1, 8, costs);
  CHECK(r.peak_activation_bytes[3] == 70.0);
  CHECK(r.peak_activation_bytes[0] == 20.0 * p + 50);
  costs.memory.keep_before_backward = {1};  // one segment: it keeps its 100 bytes
  CHECK(run(ScheduleKind::OneFOneB, p, 1, 8, costs).peak_activation_bytes[3] == 100.0);
  CHECK(costs.memory.workspace_per_stage(p) == std::vector<double>(p, 50.0));
}

TEST_CASE("memory model: an I after an F that kept its activations keeps a plain stash for W",
          "[memory_model]") {
  // ZBV on 2 ranks: the last stage (on rank 0) runs each F right before its own I, so those F
  // keep their activations and their I keeps a plain stage's stash (60) until W; a rebuilding I
  // keeps recompute_weight_stash_bytes (0). Every W frees what its own I left.
  const int p = 2;
  const int m = 4;
  CostModel costs = recomputing(100, 20);
  costs.memory.weight_stash_bytes = {60};
  costs.memory.recompute_weight_stash_bytes = {0};
  CostModel no_stash = costs;
  no_stash.memory.weight_stash_bytes = {0};
  const SimulationResult r = run(ScheduleKind::ZBVZeroBubble, p, 2, m, costs);
  const SimulationResult r0 = run(ScheduleKind::ZBVZeroBubble, p, 2, m, no_stash);
  std::vector<double> last(p, -1);
  for (const MemorySample& sample : r.memory_track) last[sample.rank] = sample.bytes;
  for (int rank = 0; rank < p; ++rank) CHECK(last[rank] == Approx(0.0).margin(1e-9));
  // The kept stashes count on rank 0 (the last stage's) between its I and its W: its track lies
  // above the one without them, by at most one stash per microbatch.
  double above = 0;
  for (size_t i = 0; i < r.memory_track.size(); ++i) {
    REQUIRE(r.memory_track[i].rank == r0.memory_track[i].rank);
    const double d = r.memory_track[i].bytes - r0.memory_track[i].bytes;
    CHECK(d >= 0);
    CHECK(d <= 60.0 * m);
    if (r.memory_track[i].rank == 0) above = std::max(above, d);
  }
  CHECK(above >= 60);
  // Without kept F (every F recomputes) only the rebuilding I's stash counts: the same peaks.
  costs.memory.keep_before_backward = {0};
  no_stash.memory.keep_before_backward = {0};
  CHECK(run(ScheduleKind::ZBVZeroBubble, p, 2, m, costs).peak_activation_bytes ==
        run(ScheduleKind::ZBVZeroBubble, p, 2, m, no_stash).peak_activation_bytes);
}

TEST_CASE("memory model: an I whose stash outgrows what F kept has its workspace on top",
          "[memory_model]") {
  // One stage: F keeps 100, I ends holding a stash of 150 (the output gradients W needs besides
  // the activations) and its workspace of 10 was measured over the larger end: 160 at its peak.
  SimulationResult result;
  result.busy = {3};
  result.actions = 3;
  const ActionKind kinds[] = {ActionKind::Forward, ActionKind::BackwardInput,
                              ActionKind::BackwardWeight};
  for (int i = 0; i < 3; ++i)
    result.timeline.push_back({0, Action{.stage = 0, .kind = kinds[i], .microbatch = 0},
                               static_cast<double>(i), static_cast<double>(i + 1)});
  MemoryCosts costs;
  costs.activation_bytes = {100};
  costs.weight_stash_bytes = {150};
  costs.forward_transient_bytes = {0};
  costs.input_transient_bytes = {10};
  costs.weight_transient_bytes = {0};
  CHECK(predict_memory(result, {0}, costs).peak_activation_bytes == std::vector<double>{160.0});
}

TEST_CASE("memory model: transient bytes count while an action runs", "[memory_model]") {
  CostModel costs = with_bytes(100, 0);
  costs.memory.transient_bytes = {5};
  SimulationResult r = run(ScheduleKind::OneFOneB, 2, 1, 4, costs);
  CHECK(r.peak_activation_bytes[0] == 205.0);  // the second F, with the first still held
  CHECK(r.peak_activation_bytes[1] == 105.0);
}

TEST_CASE("memory model: a stage holds its sent outputs until the next stage's F takes them",
          "[memory_model]") {
  // GPipe on 3 ranks, 2 microbatches, F = 1 and a latency of 0.5: rank 0 runs F at 0 and 1,
  // rank 1 at 1.5 and 2.5, rank 2 at 3 and 4. Rank 0's second F starts before rank 1 takes the
  // first output: 2 * (100 + 10). The last stage sends nothing.
  CostModel costs = with_bytes(100, 0);
  costs.latency = 0.5;
  costs.memory.sent_bytes = {10};
  SimulationResult r = run(ScheduleKind::GPipe, 3, 1, 2, costs);
  CHECK(r.peak_activation_bytes[0] == 220.0);
  CHECK(r.peak_activation_bytes[1] == 220.0);
  CHECK(r.peak_activation_bytes[2] == 200.0);
  // Every output was taken: each rank ends the step holding nothing.
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank);
    double last = -1;
    for (const MemorySample& m : r.memory_track)
      if (m.rank == rank) last = m.bytes;
    CHECK(last == 0.0);
  }
  costs.memory.sent_bytes = {-1};
  CHECK_THROWS_WITH(run(ScheduleKind::GPipe, 3, 1, 2, costs), Catch::Contains("sent_bytes"));
}

TEST_CASE("memory model: the split backward frees at I what W does not need", "[memory_model]") {
  // ZBV, p=2: with I keeping half for W the peak is below the F-to-W count's.
  CostModel costs = with_bytes(100, 0);
  SimulationResult full = run(ScheduleKind::ZBVZeroBubble, 2, 2, 4, costs);
  costs.memory.weight_stash_bytes = {50};
  SimulationResult half = run(ScheduleKind::ZBVZeroBubble, 2, 2, 4, costs);
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(full.peak_activation_bytes[rank] == 100.0 * full.peak_activations[rank]);
    CHECK(half.peak_activation_bytes[rank] <= full.peak_activation_bytes[rank]);
  }
}

TEST_CASE("memory model: with I keeping all for W it matches the stashed count everywhere",
          "[memory_model]") {
  for (ScheduleKind kind : all_schedule_kinds()) {
    INFO(schedule_name(kind));
    const int p = 4;
    const int v = default_stages_per_rank(kind);
    SimulationResult r = run(kind, p, v, 8, with_bytes(64, 1));
    const auto placement = stage_to_rank(kind, p, v);
    for (int rank = 0; rank < p; ++rank) {
      const double stages = std::count(placement.begin(), placement.end(), rank);
      CHECK(r.peak_activation_bytes[rank] == 64.0 * r.peak_activations[rank]);
      CHECK(r.peak_bytes[rank] == stages + r.peak_activation_bytes[rank]);
    }
  }
}

TEST_CASE("memory model: per-stage fixed bytes add up per rank", "[memory_model]") {
  CostModel costs = with_bytes(0, 0);
  costs.memory.fixed_bytes = {1, 2, 4, 8};
  SimulationResult r = run(ScheduleKind::ZBVZeroBubble, 2, 2, 4, costs);
  CHECK(r.peak_bytes[0] == 9.0);  // stages 0 and 3
  CHECK(r.peak_bytes[1] == 6.0);  // stages 1 and 2
}

TEST_CASE("memory model: no bytes given predicts nothing and bad costs are named",
          "[memory_model]") {
  SimulationResult r = run(ScheduleKind::OneFOneB, 2, 1, 2, CostModel::uniform(1, 1, 1));
  CHECK(r.peak_bytes.empty());
  CostModel costs = with_bytes(10, 0);
  costs.memory.activation_bytes = {1, 2, 3};
  CHECK_THROWS_WITH(run(ScheduleKind::OneFOneB, 4, 1, 4, costs),
                    Catch::Contains("'activation_bytes' has 3 values"));
  costs.memory.activation_bytes = {-1};
  CHECK_THROWS_WITH(run(ScheduleKind::OneFOneB, 4, 1, 4, costs), Catch::Contains("negative"));
  SimulationOptions no_timeline;
  no_timeline.record_timeline = false;
  SimulationResult bare = simulate_order(generate_order(ScheduleKind::OneFOneB, 2, 1, 2),
                                         stage_to_rank(ScheduleKind::OneFOneB, 2, 1), 2,
                                         with_bytes(10, 0), no_timeline);
  CHECK(bare.peak_bytes.empty());
  CHECK_THROWS_WITH(predict_memory(bare, {0, 1}, with_bytes(10, 0).memory),
                    Catch::Contains("record_timeline"));
}

TEST_CASE("memory model: a result of another pipeline is refused before it is replayed",
          "[memory_model]") {
  // 1F1B on 2 ranks: its placement is {0, 1}; its events name ranks 0 and 1 and stages 0 and 1.
  SimulationOptions options;
  options.record_timeline = true;
  const SimulationResult r = simulate_order(generate_order(ScheduleKind::OneFOneB, 2, 1, 2), {0, 1},
                                            2, CostModel::uniform(1, 1, 1), options);
  const MemoryCosts memory = with_bytes(10, 1).memory;
  CHECK(predict_memory(r, {0, 1}, memory).peak_bytes.size() == 2);
  CHECK_THROWS_WITH(predict_memory(r, {0, 1, 2}, memory),
                    Catch::Contains("stage 2 is placed on rank 2 but the result has 2 ranks"));
  CHECK_THROWS_WITH(predict_memory(r, {0}, memory),
                    Catch::Contains("the timeline's 1F0 is not an action of the 1 stages"));
  SimulationResult other_rank = r;
  other_rank.timeline.back().rank = 5;
  CHECK_THROWS_WITH(predict_memory(other_rank, {0, 1}, memory),
                    Catch::Contains("the timeline has rank 5 but the result has 2 ranks"));
}

TEST_CASE("memory costs: kept bytes follow the recompute switch per stage", "[memory_model]") {
  MemoryCosts c;
  c.activation_bytes = {100, 200};
  c.recompute_activation_bytes = {10};
  c.recompute = {0, 1};
  CHECK(c.kept(0) == 100);
  CHECK(c.kept(1) == 10);
  CHECK(c.kept_per_stage(2) == std::vector<double>{100, 10});
  CHECK_FALSE(c.empty());
  CHECK(MemoryCosts{}.empty());
}

TEST_CASE("memory model: the predicted track rises with each F and falls with each B",
          "[memory_model]") {
  SimulationResult r = run(ScheduleKind::GPipe, 1, 1, 2, with_bytes(100, 0));
  // F0 F1 B0 B1 on one rank: 100, 200, then 100 and 0 as the backwards end.
  std::vector<double> bytes;
  for (const MemorySample& s : r.memory_track) bytes.push_back(s.bytes);
  CHECK(bytes == std::vector<double>{100, 100, 200, 200, 200, 100, 100, 0});
  CHECK_THAT(chrome_trace_json(r), Catch::Contains("memory rank 0"));
  CHECK_THAT(timeline_svg(r), Catch::Contains("<polyline"));
  CHECK_THAT(timeline_svg(run(ScheduleKind::GPipe, 1, 1, 2, CostModel::uniform(1, 1, 1))),
             !Catch::Contains("<polyline"));
}

TEST_CASE("memory model: V-Half holds about 1/2 of 1F1B's activation bytes, V-Min about 1/3",
          "[memory_model]") {
  // The same job: a V stage is half a rank's share, so it keeps half of 1F1B's stage bytes. As in
  // the paper's model, I frees the activations (W keeps no stash here).
  auto peak = [](ScheduleKind kind, int p, int v, int m, double bytes) {
    CostModel costs = CostModel::uniform(1, 1, 1);
    costs.memory.activation_bytes = {bytes};
    costs.memory.weight_stash_bytes = {0};
    SimulationResult r = run(kind, p, v, m, costs);
    return *std::max_element(r.peak_activation_bytes.begin(), r.peak_activation_bytes.end());
  };
  for (int p : {4, 5, 6, 8, 12, 16}) {
    for (int m : {2 * p, 2 * p + 1, 3 * p}) {
      const double one_f_one_b = peak(ScheduleKind::OneFOneB, p, 1, m, 2);
      const double vhalf = peak(ScheduleKind::VHalf, p, 2, m, 1) / one_f_one_b;
      const double vmin = peak(ScheduleKind::VMin, p, 2, m, 1) / one_f_one_b;
      INFO("p=" << p << " m=" << m << ": V-Half " << vhalf << ", V-Min " << vmin);
      CHECK(one_f_one_b == 2.0 * p);
      CHECK(vhalf <= 0.55);
      CHECK(vmin <= vhalf);
      // V-Min's block keeps a microbatch on its rank for 4p + 2 slots of every 6: 2p/3 + 2 stage
      // activations at most (1/3 + 1/p of 1F1B's), at most 0.4 of them from p = 8 except where
      // 3 divides p (p = 12: 10 of 24).
      CHECK(vmin <= 1.0 / 3 + 1.0 / p + 1e-9);
      if (p == 8 || p == 16) CHECK(vmin <= 0.4);
    }
  }
}

TEST_CASE("memory model: each action holds its own workspace", "[memory_model]") {
  // One stage, F0 F1 I0 W0 I1 W1: F keeps 100 (20 of it for W); F's workspace is 30, I's 10, W's
  // 60. The peak is F1's, 200 + 30, not 200 plus the stage's largest workspace (60).
  CostModel costs = CostModel::uniform(1, 1, 1);
  costs.memory.activation_bytes = {100};
  costs.memory.weight_stash_bytes = {20};
  costs.memory.forward_transient_bytes = {30};
  costs.memory.input_transient_bytes = {10};
  costs.memory.weight_transient_bytes = {60};
  costs.memory.transient_bytes = {60};
  const PipelineOrder order = {
      {make_action(0, ActionKind::Forward, 0), make_action(0, ActionKind::Forward, 1),
       make_action(0, ActionKind::BackwardInput, 0), make_action(0, ActionKind::BackwardWeight, 0),
       make_action(0, ActionKind::BackwardInput, 1),
       make_action(0, ActionKind::BackwardWeight, 1)}};
  SimulationResult r = simulate_order(order, {0}, 2, costs);
  CHECK(r.peak_activation_bytes[0] == 230.0);
  // W runs with 120 held (100 of microbatch 1, 20 stashed for W0): 180.
  costs.memory.forward_transient_bytes = {0};
  r = simulate_order(order, {0}, 2, costs);
  CHECK(r.peak_activation_bytes[0] == 210.0);  // I0 with 200 held
  // Without per-action figures every action holds transient_bytes.
  costs.memory.forward_transient_bytes.clear();
  costs.memory.input_transient_bytes.clear();
  costs.memory.weight_transient_bytes.clear();
  r = simulate_order(order, {0}, 2, costs);
  CHECK(r.peak_activation_bytes[0] == 260.0);
  costs.memory.input_transient_bytes = {1, 2};
  CHECK_THROWS_WITH(costs.memory.check(3), Catch::Contains("'input_transient_bytes' has 2 values"));
}

TEST_CASE("the stages whose every forward comes right before its own backward", "[memory_model]") {
  // ZBV's last stage is on rank 0, and its loss is local: each F is followed by its I.
  const PipelineOrder zbv = generate_order(ScheduleKind::ZBVZeroBubble, 4, 2, 8);
  CHECK(stages_with_backward_after_each_forward(zbv[0]) == std::vector<int>{7});
  for (int r = 1; r < 4; ++r) CHECK(stages_with_backward_after_each_forward(zbv[r]).empty());
  const PipelineOrder gpipe = generate_order(ScheduleKind::GPipe, 4, 1, 8);
  for (const RankOrder& rank : gpipe) CHECK(stages_with_backward_after_each_forward(rank).empty());
  // One F of the stage not followed by its backward is enough to keep it recomputing.
  const RankOrder mixed = {
      make_action(0, ActionKind::Forward, 0),      make_action(0, ActionKind::FullBackward, 0),
      make_action(0, ActionKind::Forward, 1),      make_action(0, ActionKind::Forward, 2),
      make_action(0, ActionKind::FullBackward, 1), make_action(0, ActionKind::FullBackward, 2)};
  CHECK(stages_with_backward_after_each_forward(mixed).empty());
}

TEST_CASE("memory costs: a stage's workspace is the most any of its actions holds",
          "[memory_model]") {
  MemoryCosts c;
  c.activation_bytes = {100};
  c.forward_transient_bytes = {30};
  c.input_transient_bytes = {10};
  c.weight_transient_bytes = {60};
  c.full_backward_transient_bytes = {40};
  CHECK(c.workspace_per_stage(2) == std::vector<double>{60, 60});
  c.recompute = {0, 1};  // I and B rebuild the 100 bytes
  CHECK(c.workspace_per_stage(2) == std::vector<double>{60, 140});
  c.sent_bytes = {8};
  CHECK(c.sent_per_stage(2) == std::vector<double>{8, 0});  // the last stage sends nothing
}
