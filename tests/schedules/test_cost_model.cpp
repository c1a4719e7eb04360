#include <catch2/catch.hpp>
#include <stdexcept>

#include "tensorplay/schedules/cost_model.h"

using namespace tensorplay::schedules;

TEST_CASE("durations per kind: B = I + W, OVERLAP_F_B = factor * (F + B)", "[cost_model]") {
  CostModel costs = CostModel::uniform(1, 2, 3);
  CHECK(costs.duration(parse_action("0F0")) == 1);
  CHECK(costs.duration(parse_action("0I0")) == 2);
  CHECK(costs.duration(parse_action("0W0")) == 3);
  CHECK(costs.duration(parse_action("0B0")) == 5);
  CHECK(costs.duration(parse_action("(0F1;3B0)OVERLAP_F_B")) == 6);
  costs.overlap_factor = 0.5;
  CHECK(costs.duration(parse_action("(0F1;3B0)OVERLAP_F_B")) == 3);
  CHECK(costs.duration(parse_action("0SEND_F0")) == 0);
}

TEST_CASE("per-stage costs and transfer times", "[cost_model]") {
  CostModel costs;
  costs.forward = {1, 2, 3};
  costs.input_backward = {1};
  costs.weight_backward = {0.5};
  costs.latency = 0.1;
  costs.bandwidth = 10;
  costs.boundary_bytes = {5, 20};
  CHECK(costs.duration(parse_action("2F0")) == 3);
  CHECK(costs.duration(parse_action("2B0")) == 1.5);
  CHECK(costs.transfer_time(0) == Approx(0.6));
  CHECK(costs.transfer_time(1) == Approx(2.1));
  CHECK_NOTHROW(costs.check(3));
  CHECK_THROWS_WITH(costs.check(4), Catch::Contains("'forward' has 3 values"));
  costs.latency = -1;
  CHECK_THROWS_AS(costs.check(3), std::invalid_argument);
}

TEST_CASE("a lookup for a stage a per-stage list lacks throws naming the list and the stage",
          "[cost_model]") {
  // Read past its end, the list would give whatever follows it in memory.
  CostModel costs;
  costs.forward = {1, 2, 3};
  costs.input_backward = {1, 1};
  costs.boundary_bytes = {5, 20};
  costs.recompute_ahead = {0.5, 0.5};
  costs.recompute = {0.5, 0.5};
  CHECK(costs.duration(parse_action("2F0")) == 3);
  CHECK_THROWS_WITH(costs.duration(parse_action("3F0")),
                    Catch::Contains("'forward' has 3 values, none for stage 3"));
  CHECK_THROWS_WITH(costs.duration(parse_action("2B0")),
                    Catch::Contains("'input_backward' has 2 values, none for stage 2"));
  CHECK_THROWS_WITH(costs.duration(parse_action("(0F1;3B0)OVERLAP_F_B")),
                    Catch::Contains("'input_backward'"));
  CHECK_THROWS_WITH(costs.transfer_time(2),
                    Catch::Contains("'boundary_bytes' has 2 values, none for stage 2"));
  CHECK_THROWS_WITH(costs.ahead(2), Catch::Contains("'recompute_ahead'"));
  CHECK_THROWS_WITH(costs.recomputation(2), Catch::Contains("'recompute'"));
  CHECK_THROWS_AS(costs.duration(Action{-1, ActionKind::Forward, 0, {}}), std::invalid_argument);
  // A single value serves every stage.
  CHECK(costs.duration(parse_action("7W0")) == 1);
}
