#include <catch2/catch.hpp>

#include "tensorplay/schedules/errors.h"
#include "tensorplay/schedules/generators.h"
#include "tensorplay/schedules/validator.h"

using namespace tensorplay::schedules;

TEST_CASE("a generated order validates and yields its placement", "[validator]") {
  PipelineOrder order = zbv_zero_bubble_order(2, 4);
  CHECK(validate_order(order, 4, 4) == std::vector<int>{0, 1, 1, 0});
  std::vector<int> placement = {0, 1, 1, 0};
  CHECK_NOTHROW(validate_order(order, 4, 4, &placement));
  std::vector<int> wrong = {0, 1, 0, 1};
  CHECK_THROWS_WITH(validate_order(order, 4, 4, &wrong),
                    Catch::Contains("placement puts it on rank"));
}

TEST_CASE("a swapped F and B is caught with the table marked", "[validator]") {
  PipelineOrder order = one_f_one_b_order(2, 2);
  std::swap(order[1][0], order[1][1]);  // 1B0 before 1F0
  try {
    validate_order(order, 2, 2);
    FAIL("expected a ScheduleError");
  } catch (const ScheduleError& e) {
    std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("Rank 1, step 0: Running Full Backward for stage 1, "
                                     "microbatch 0 without first running Forward"));
    CHECK_THAT(what, Catch::Contains("Full pipeline schedule:"));
    CHECK_THAT(what, Catch::Contains("Step 0: 0F0    1B0    <-- ERROR HERE"));
  }
}

TEST_CASE("a missing W is caught", "[validator]") {
  PipelineOrder order = zbv_zero_bubble_order(2, 4);
  order[0].pop_back();  // 0W3
  CHECK_THROWS_WITH(validate_order(order, 4, 4),
                    Catch::Contains("Missing Backward Weight (W) for stage 0, microbatch 3"));
}

TEST_CASE("W before its I, duplicates and missing F are caught", "[validator]") {
  PipelineOrder w_first = {parse_rank_order("0F0 0W0 0I0")};
  CHECK_THROWS_WITH(validate_order(w_first, 1, 1),
                    Catch::Contains("without first running Backward Input"));
  PipelineOrder twice = {parse_rank_order("0F0 0F0 0B0")};
  CHECK_THROWS_WITH(validate_order(twice, 1, 1), Catch::Contains("runs twice"));
  PipelineOrder missing = {parse_rank_order("0F0 0B0")};
  CHECK_THROWS_WITH(validate_order(missing, 1, 2),
                    Catch::Contains("Missing Forward for stage 0, microbatch 1"));
  PipelineOrder b_and_w = {parse_rank_order("0F0 0B0 0W0")};
  CHECK_THROWS_AS(validate_order(b_and_w, 1, 1), ScheduleError);
  PipelineOrder comm = {parse_rank_order("0F0 0SEND_F0 0B0")};
  CHECK_THROWS_WITH(validate_order(comm, 1, 1), Catch::Contains("expected a compute action"));
}

TEST_CASE("a stage on two ranks is caught", "[validator]") {
  PipelineOrder order = {parse_rank_order("0F0 0B0"), parse_rank_order("1F0 0F1 1B0 0B1")};
  CHECK_THROWS_WITH(validate_order(order, 2, 2),
                    Catch::Contains("Stage 0 is assigned to both rank 1 and rank 0"));
}

TEST_CASE("a cross-rank deadlock is caught", "[validator]") {
  // Rank 0 wants 0B0 (needs 1B0) before 0F1; rank 1 wants 1F1 (needs 0F1) before 1B0.
  PipelineOrder order = {parse_rank_order("0F0 0B0 0F1 0B1"), parse_rank_order("1F0 1F1 1B0 1B1")};
  try {
    validate_order(order, 2, 2);
    FAIL("expected a deadlock");
  } catch (const ScheduleError& e) {
    std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("Deadlock at step 2"));
    CHECK_THAT(what, Catch::Contains("rank 0 waits to run 0B0"));
    CHECK_THAT(what, Catch::Contains("rank 1 waits to run 1F1"));
    CHECK_THAT(what, Catch::Contains("<-- ERROR HERE"));
  }
}

TEST_CASE("step_order shows the bubbles of a schedule", "[validator]") {
  SteppedOrder stepped = step_order(gpipe_order(2, 2), 2, 2);
  REQUIRE(stepped.size() == 2);
  // Rank 1 waits one step for 0F0; rank 0 waits for 1B0 before 0B0.
  REQUIRE(stepped[0].size() == 6);
  CHECK_FALSE(stepped[1][0].has_value());
  REQUIRE(stepped[1][1].has_value());
  CHECK(to_string(*stepped[1][1]) == "1F0");
  CHECK_FALSE(stepped[0][2].has_value());
  CHECK_FALSE(stepped[0][3].has_value());
  REQUIRE(stepped[0][4].has_value());
  CHECK(to_string(*stepped[0][4]) == "0B0");
}

TEST_CASE("count helpers read sizes off an order", "[validator]") {
  PipelineOrder order = zbv_zero_bubble_order(3, 5);
  CHECK(count_stages(order) == 6);
  CHECK(count_microbatches(order) == 5);
}
