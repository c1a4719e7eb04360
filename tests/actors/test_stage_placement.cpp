// Tests of the schedule's placement: rank counts, stage-to-rank maps and orders, computed alone
// (no stages, no actors), and its errors.
#include <catch2/catch.hpp>

#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/pipelining/runtime/stage_placement.h"
#include "tensorplay/schedules/csv.h"

using namespace tensorplay;
using namespace tensorplay::pipelining;
using schedules::ScheduleKind;

TEST_CASE("placement: one stage per rank under GPipe and 1F1B", "[actors][placement]") {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
    StagePlacement p = place_stages(kind, 4, 8, /*stages_per_rank=*/3);  // ignored: single
    CHECK(p.ranks == 4);
    CHECK(p.stages_per_rank == 1);
    CHECK(p.stage_to_rank == std::vector<int>{0, 1, 2, 3});
    REQUIRE(p.order.size() == 4);
    CHECK(p.stages_of(2) == std::vector<int>{2});
  }
}

TEST_CASE("placement: loop and V placements of several stages per rank", "[actors][placement]") {
  StagePlacement loop = place_stages(ScheduleKind::Interleaved1F1B, 4, 4, 2);
  CHECK(loop.ranks == 2);
  CHECK(loop.stage_to_rank == std::vector<int>{0, 1, 0, 1});
  CHECK(loop.stages_of(1) == std::vector<int>{1, 3});
  StagePlacement v = place_stages(ScheduleKind::ZBVZeroBubble, 4, 4);
  CHECK(v.ranks == 2);
  CHECK(v.stage_to_rank == std::vector<int>{0, 1, 1, 0});
  CHECK(v.stages_of(0) == stages_of_rank(ScheduleKind::ZBVZeroBubble, 0, 4));
}

TEST_CASE("placement: every rank's order holds each of its actions once", "[actors][placement]") {
  StagePlacement p = place_stages(ScheduleKind::OneFOneB, 3, 5);
  for (int r = 0; r < p.ranks; ++r) {
    int forwards = 0;
    for (const schedules::Action& a : p.order[r]) {
      CHECK(p.stage_to_rank[a.stage] == r);
      forwards += a.kind == schedules::ActionKind::Forward;
    }
    CHECK(forwards == 5);
    CHECK(forward_only(p.order[r]).size() == 5u);
  }
}

TEST_CASE("placement: a given order replaces the generated one after its checks",
          "[actors][placement]") {
  StagePlacement gpipe = place_stages(ScheduleKind::GPipe, 2, 3);
  StagePlacement given = place_stages(ScheduleKind::OneFOneB, 2, 3, 0, gpipe.order);
  CHECK(schedules::dump_csv(given.order) == schedules::dump_csv(gpipe.order));
  schedules::PipelineOrder one_row = {gpipe.order[0]};
  CHECK_THROWS_WITH(place_stages(ScheduleKind::OneFOneB, 2, 3, 0, one_row),
                    Catch::Contains("1F1B"));
}

TEST_CASE("placement: counts that cannot be placed are errors naming the schedule",
          "[actors][placement]") {
  CHECK_THROWS_WITH(place_stages(ScheduleKind::Interleaved1F1B, 5, 4, 2),
                    Catch::Contains("5 stages cannot be placed 2 per rank"));
  CHECK_THROWS_WITH(place_stages(ScheduleKind::OneFOneB, 2, 0),
                    Catch::Contains("n_microbatches must be at least 1"));
  CHECK_THROWS_WITH(place_stages(ScheduleKind::LoopedBFS, 4, 4, -1),
                    Catch::Contains("stages_per_rank must be 0"));
}
