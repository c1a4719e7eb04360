#include <catch2/catch.hpp>
#include <string>

#include "tensorplay/schedules/action.h"
#include "tensorplay/schedules/cost_model.h"
#include "tensorplay/schedules/csv.h"
#include "tensorplay/schedules/errors.h"
#include "tensorplay/schedules/lowering.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/schedules/sharding_actions.h"
#include "tensorplay/schedules/simulator.h"
#include "tensorplay/schedules/timeline_export.h"
#include "tensorplay/schedules/validator.h"

using namespace tensorplay::schedules;

namespace {

// Position of `action` in `order`, or -1.
int position(const RankOrder& order, const Action& action) {
  for (std::size_t i = 0; i < order.size(); ++i)
    if (order[i] == action) return static_cast<int>(i);
  return -1;
}

int count_sharding(const PipelineOrder& order) {
  int n = 0;
  for (const RankOrder& rank : order)
    for (const Action& a : rank) n += is_sharding(a.kind) ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("sharding actions read and print as PyTorch's, with no microbatch", "[sharding]") {
  CHECK(to_string(make_action(2, ActionKind::Unshard, 0)) == "2UNSHARD");
  CHECK(to_string(make_action(0, ActionKind::Reshard, 0)) == "0RESHARD");
  CHECK(to_string(make_action(13, ActionKind::ReduceGrad, 0)) == "13REDUCE_GRAD");
  CHECK(parse_action("3REDUCE_GRAD") == make_action(3, ActionKind::ReduceGrad, 0));
  CHECK(parse_action("1RESHARD") == make_action(1, ActionKind::Reshard, 0));
  CHECK(parse_action("0UNSHARD") == make_action(0, ActionKind::Unshard, 0));
  CHECK(parse_action("1RECV_B2") == make_action(1, ActionKind::RecvB, 2));  // not RESHARD
  CHECK_THROWS_WITH(parse_action("0UNSHARD3"), Catch::Contains("takes no microbatch"));
  CHECK(is_sharding(ActionKind::ReduceGrad));
  CHECK_FALSE(is_sharding(ActionKind::RecvB));
  CHECK_FALSE(is_compute(ActionKind::Unshard));
  CHECK_FALSE(is_communication(ActionKind::Reshard));
  CHECK(is_communication(ActionKind::SendF));
}

TEST_CASE("every schedule with sharding actions validates, lowers and round-trips in CSV",
          "[sharding]") {
  for (ScheduleKind kind : all_schedule_kinds()) {
    const int ranks = 2, per_rank = default_stages_per_rank(kind), n_microbatches = 4;
    const int stages = ranks * per_rank;
    INFO(schedule_name(kind));
    PipelineOrder plain = generate_order(kind, ranks, per_rank, n_microbatches);
    PipelineOrder order = add_sharding_actions(plain);
    CHECK(count_sharding(order) == 3 * stages);
    std::vector<int> placement = stage_to_rank(kind, ranks, per_rank);
    CHECK_NOTHROW(validate_order(order, stages, n_microbatches, &placement));
    CHECK(add_sharding_actions(order) == order);  // idempotent
    CHECK(strip_sharding(order) == plain);
    CHECK(parse_csv(dump_csv(order)) == order);
    PipelineOrder lowered = lower_to_communication(order, placement);
    CHECK(parse_csv(dump_csv(lowered), CsvFormat::WithCommunication) == lowered);
    CHECK(strip_communication(lowered) == order);  // the sharding actions stay
    // Once per stage and step, on the stage's rank: UNSHARD before the first F, REDUCE_GRAD then
    // RESHARD right after the last weight gradient.
    for (int stage = 0; stage < stages; ++stage) {
      const RankOrder& rank = order[placement[stage]];
      const int unshard = position(rank, make_action(stage, ActionKind::Unshard, 0));
      const int reduce = position(rank, make_action(stage, ActionKind::ReduceGrad, 0));
      const int reshard = position(rank, make_action(stage, ActionKind::Reshard, 0));
      REQUIRE(unshard >= 0);
      CHECK(reduce > unshard);
      CHECK(reshard == reduce + 1);
    }
  }
}

TEST_CASE("add_sharding_actions shards only the stages listed", "[sharding]") {
  PipelineOrder order =
      add_sharding_actions(generate_order(ScheduleKind::Interleaved1F1B, 2, 2, 4), {1, 2});
  CHECK(count_sharding(order) == 6);
  CHECK(position(order[1], make_action(1, ActionKind::Unshard, 0)) >= 0);
  CHECK(position(order[0], make_action(2, ActionKind::ReduceGrad, 0)) >= 0);
  CHECK(position(order[0], make_action(0, ActionKind::Unshard, 0)) == -1);
  CHECK_NOTHROW(validate_order(order, 4, 4));
  CHECK_THROWS_WITH(add_sharding_actions(order, {-1}), Catch::Contains("sharded stage -1"));
}

TEST_CASE("the validator refuses misplaced sharding actions", "[sharding]") {
  const PipelineOrder plain = generate_order(ScheduleKind::OneFOneB, 2, 1, 2);
  // 1F1B on 2 ranks, 2 microbatches: rank 1 runs 1F0 1B0 1F1 1B1.
  auto with = [&](int rank, std::size_t at, const Action& action) {
    PipelineOrder order = plain;
    order[rank].insert(order[rank].begin() + static_cast<std::ptrdiff_t>(at), action);
    return order;
  };
  CHECK_NOTHROW(validate_order(with(1, 0, parse_action("1UNSHARD")), 2, 2));
  CHECK_NOTHROW(validate_order(with(1, 4, parse_action("1REDUCE_GRAD")), 2, 2));
  CHECK_THROWS_WITH(validate_order(with(1, 1, parse_action("1UNSHARD")), 2, 2),
                    Catch::Contains("UNSHARD of stage 1 runs after its first forward"));
  CHECK_THROWS_WITH(validate_order(with(1, 3, parse_action("1REDUCE_GRAD")), 2, 2),
                    Catch::Contains("REDUCE_GRAD of stage 1 runs after 1 of its 2 weight "
                                    "gradients (B or W): place it after the stage's last"));
  const std::vector<int> placement = {0, 1};
  CHECK_THROWS_WITH(validate_order(with(0, 0, parse_action("1RESHARD")), 2, 2, &placement),
                    Catch::Contains("Stage 1 runs on rank 0 but the placement puts it on rank 1"));
  CHECK_THROWS_WITH(validate_order(with(1, 0, parse_action("5UNSHARD")), 2, 2),
                    Catch::Contains("stage 5 is outside 0..1"));
  PipelineOrder twice = with(1, 4, parse_action("1REDUCE_GRAD"));
  twice[1].push_back(parse_action("1REDUCE_GRAD"));
  CHECK_THROWS_WITH(validate_order(twice, 2, 2), Catch::Contains("runs twice: once per step"));
  PipelineOrder swapped = with(1, 4, parse_action("1RESHARD"));
  swapped[1].push_back(parse_action("1REDUCE_GRAD"));
  CHECK_THROWS_WITH(validate_order(swapped, 2, 2),
                    Catch::Contains("REDUCE_GRAD of stage 1 runs after its RESHARD"));
  // With I and W apart, REDUCE_GRAD waits for the last W, not the last I.
  PipelineOrder zb = generate_order(ScheduleKind::ZBVZeroBubble, 2, 2, 2);
  PipelineOrder sharded = add_sharding_actions(zb);
  CHECK_NOTHROW(validate_order(sharded, 4, 2));
  for (RankOrder& rank : sharded) {
    for (std::size_t i = 1; i < rank.size(); ++i) {
      if (rank[i].kind == ActionKind::ReduceGrad && rank[i - 1].kind == ActionKind::BackwardWeight)
        std::swap(rank[i], rank[i - 1]);
    }
  }
  CHECK_THROWS_WITH(validate_order(sharded, 4, 2), Catch::Contains("weight gradients"));
}

TEST_CASE("the simulator costs each stage's all-gather and reduce-scatter", "[sharding]") {
  const PipelineOrder plain = generate_order(ScheduleKind::GPipe, 2, 1, 4);
  const std::vector<int> placement = {0, 1};
  CostModel costs = CostModel::uniform(1.0, 1.0, 1.0);
  const PipelineOrder order = add_sharding_actions(plain);
  // No collective time given: the same step as without the actions.
  const double before = simulate_order(plain, placement, 4, costs).makespan;
  CHECK(simulate_order(order, placement, 4, costs).makespan == Approx(before));
  costs.all_gather = {0.5, 0.25};
  costs.reduce_scatter = {0.75};
  CHECK_NOTHROW(costs.check(2));
  CHECK(costs.duration(parse_action("1UNSHARD")) == 0.25);
  CHECK(costs.duration(parse_action("0REDUCE_GRAD")) == 0.75);
  CHECK(costs.duration(parse_action("0RESHARD")) == 0.0);
  SimulationResult result = simulate_order(order, placement, 4, costs);
  // GPipe 2 x 4 (B = 2): stage 0's UNSHARD delays everything by 0.5; stage 0's REDUCE_GRAD
  // ends the step (stage 1's runs while rank 0 still computes its backward).
  CHECK(result.makespan == Approx(before + 0.5 + 0.75));
  int collectives = 0;
  for (const TimelineEvent& e : result.timeline)
    collectives += e.action.kind == ActionKind::Unshard || e.action.kind == ActionKind::ReduceGrad;
  CHECK(collectives == 4);
  costs.all_gather = {0.5, -0.25};
  CHECK_THROWS_WITH(costs.check(2), Catch::Contains("all_gather"));
}

TEST_CASE("the chrome trace shows each rank's collectives on a track of their own", "[sharding]") {
  const std::vector<int> placement = {0, 1};
  CostModel costs = CostModel::uniform(1.0, 1.0, 1.0);
  costs.all_gather = {0.5};
  costs.reduce_scatter = {0.5};
  const PipelineOrder plain = generate_order(ScheduleKind::OneFOneB, 2, 1, 2);
  const std::string plain_json = chrome_trace_json(simulate_order(plain, placement, 2, costs));
  CHECK_THAT(plain_json, !Catch::Contains("collectives"));
  const std::string json =
      chrome_trace_json(simulate_order(add_sharding_actions(plain), placement, 2, costs));
  CHECK_THAT(json, Catch::Contains("\"tid\":3,\"args\":{\"name\":\"rank 1 collectives\"}"));
  CHECK_THAT(json, Catch::Contains("{\"name\":\"1UNSHARD\",\"cat\":\"UNSHARD\",\"ph\":\"X\","
                                   "\"pid\":0,\"tid\":3,"));
  CHECK_THAT(json, Catch::Contains("{\"name\":\"0REDUCE_GRAD\",\"cat\":\"REDUCE_GRAD\",\"ph\":"
                                   "\"X\",\"pid\":0,\"tid\":2,"));
  CHECK_THAT(json, Catch::Contains("{\"name\":\"0F0\",\"cat\":\"F\",\"ph\":\"X\",\"pid\":0,"
                                   "\"tid\":0,"));
}

TEST_CASE("the memory model holds a sharded stage's gathered bytes from UNSHARD to RESHARD",
          "[sharding][memory_model]") {
  const std::vector<int> placement = {0, 1};
  CostModel costs = CostModel::uniform(1.0, 1.0, 1.0);
  costs.memory.activation_bytes = {10};
  costs.memory.fixed_bytes = {100};  // the shards
  costs.memory.gathered_bytes = {50, 70};
  const PipelineOrder plain = generate_order(ScheduleKind::GPipe, 2, 1, 4);
  // Without sharding actions nothing is gathered: GPipe holds 4 microbatches on each rank.
  const SimulationResult replicated = simulate_order(plain, placement, 4, costs);
  CHECK(replicated.peak_bytes == std::vector<double>{140, 140});
  const SimulationResult sharded = simulate_order(add_sharding_actions(plain), placement, 4, costs);
  CHECK(sharded.peak_bytes == std::vector<double>{190, 210});
  // After RESHARD the gathered bytes are gone: each rank's track ends at its shards' level.
  for (int rank = 0; rank < 2; ++rank) {
    double last = -1;
    for (const MemorySample& m : sharded.memory_track)
      if (m.rank == rank) last = m.bytes;
    CHECK(last == 0);
  }
  costs.memory.gathered_bytes = {-1};
  CHECK_THROWS_WITH(costs.memory.check(2), Catch::Contains("gathered_bytes"));
}
