// Tests for policy_factory.h: one factory gives each rank its policy (the order's, the dynamic
// policy, a user's), and the simulator runs what the runtime would.
#include <catch2/catch.hpp>

#include "tensorplay/schedules/generators.h"
#include "tensorplay/schedules/policy_factory.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/schedules/simulator.h"

using namespace tensorplay::schedules;

TEST_CASE("policy_context gives each rank its stages and order row", "[policy_factory]") {
  PipelineOrder order = generate_order(ScheduleKind::ZBVZeroBubble, 2, 2, 4);
  std::vector<int> placement = stage_to_rank(ScheduleKind::ZBVZeroBubble, 2, 2);
  PolicyContext c = policy_context(1, order, placement, 4);
  CHECK(c.rank == 1);
  CHECK(c.local_stages == std::vector<int>{1, 2});
  CHECK(c.num_stages == 4);
  CHECK(c.n_microbatches == 4);
  REQUIRE(c.order != nullptr);
  CHECK(*c.order == order[1]);
  CHECK(policy_context(1, {}, placement, 4).order == nullptr);
}

TEST_CASE("the static-order factory simulates as simulate_order", "[policy_factory]") {
  const int ranks = 4, n = 8;
  for (auto kind : all_schedule_kinds()) {
    DYNAMIC_SECTION(schedule_name(kind)) {
      int spr = default_stages_per_rank(kind);
      PipelineOrder order = generate_order(kind, ranks, spr, n);
      std::vector<int> placement = stage_to_rank(kind, ranks, spr);
      CostModel costs;
      auto owned = make_policies(nullptr, order, placement, n);
      REQUIRE(owned.size() == static_cast<size_t>(ranks));
      std::vector<SchedulePolicy*> policies;
      for (auto& p : owned) policies.push_back(p.get());
      double makespan = simulate(policies, placement, n, costs).makespan;
      CHECK(makespan == simulate_order(order, placement, n, costs).makespan);
    }
  }
}

TEST_CASE("the dynamic factory keeps its cap in the simulator", "[policy_factory]") {
  std::vector<int> placement = stage_to_rank(Placement::Loop, 4, 1);
  auto owned = make_policies(dynamic_policies({.max_stashed_activations = 2}), {}, placement, 8);
  std::vector<SchedulePolicy*> policies;
  for (auto& p : owned) policies.push_back(p.get());
  SimulationResult result = simulate(policies, placement, 8, CostModel{});
  for (int peak : result.peak_activations) CHECK(peak <= 2);
}

TEST_CASE("factories that cannot build are clear errors", "[policy_factory]") {
  std::vector<int> placement = stage_to_rank(Placement::Loop, 2, 1);
  CHECK_THROWS_WITH(make_policies(static_order_policies(), {}, placement, 2),
                    Catch::Contains("needs the rank's order"));
  PolicyFactory null_factory = [](const PolicyContext&) {
    return std::unique_ptr<SchedulePolicy>();
  };
  CHECK_THROWS_WITH(make_policies(null_factory, {}, placement, 2),
                    Catch::Contains("returned no policy for rank 0"));
}
