// Tests for tensorplay/pipelining/planner/plan_report.h: the best few with their figures, and the
// losers by reason.
#include <catch2/catch.hpp>

#include "synthetic_profile.h"
#include "tensorplay/pipelining/planner/plan_report.h"

namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

TEST_CASE("the report ranks the best and counts the others by reason", "[planner][report]") {
  const pp::Profile profile = planner_test::synthetic({1, 1, 1, 1}, 10, 2);
  pp::PlanRequest request{.world = 2, .memory_cap = 50, .batch = 4};
  request.schedules = {sc::ScheduleKind::GPipe, sc::ScheduleKind::OneFOneB};
  const std::string report = pp::format_plan_report(pp::plan(profile, request), 2);
  CHECK_THAT(report, Catch::Contains("configurations simulated in") &&
                         Catch::Contains("transfers over the in_process channel"));
  CHECK_THAT(report, Catch::Contains("  1. 1F1B, 2 ranks x 1 stage, 4 microbatches, cut balanced, "
                                     "recompute none, 1 thread: step 30 s, bubble 20.0%"));
  CHECK_THAT(report, Catch::Contains("  2. "));
  CHECK_THAT(report, !Catch::Contains("  3. "));  // top 2
  CHECK_THAT(report, Catch::Contains("why the others lost:"));
  CHECK_THAT(report, Catch::Contains("over the memory cap: ") &&
                         Catch::Contains("rank 0 needs 80 B > 50 B"));
  CHECK_THAT(report, Catch::Contains("sizes the schedule refuses: "));  // 1F1B at 1 microbatch
  request.memory_cap = 1;
  request.try_recompute = false;
  CHECK_THAT(pp::format_plan_report(pp::plan(profile, request)),
             Catch::Contains("no configuration fits"));
}
