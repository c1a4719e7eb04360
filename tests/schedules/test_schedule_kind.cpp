#include <catch2/catch.hpp>

#include "tensorplay/schedules/schedule_kind.h"

using namespace tensorplay::schedules;

TEST_CASE("schedule names parse case-insensitively like get_schedule_class", "[schedule_kind]") {
  CHECK(parse_schedule_kind("GPipe") == ScheduleKind::GPipe);
  CHECK(parse_schedule_kind("gpipe") == ScheduleKind::GPipe);
  CHECK(parse_schedule_kind("1f1b") == ScheduleKind::OneFOneB);
  CHECK(parse_schedule_kind("INTERLEAVED1F1B") == ScheduleKind::Interleaved1F1B);
  CHECK(parse_schedule_kind("LoopedBFS") == ScheduleKind::LoopedBFS);
  CHECK(parse_schedule_kind("interleavedzerobubble") == ScheduleKind::InterleavedZeroBubble);
  CHECK(parse_schedule_kind("ZbvZeroBubble") == ScheduleKind::ZBVZeroBubble);
  CHECK(parse_schedule_kind("dualpipev") == ScheduleKind::DualPipeV);
  CHECK(parse_schedule_kind("vhalf") == ScheduleKind::VHalf);
  CHECK(parse_schedule_kind("VMIN") == ScheduleKind::VMin);
  for (ScheduleKind kind : all_schedule_kinds()) {
    CHECK(parse_schedule_kind(schedule_name(kind)) == kind);
  }
  CHECK_THROWS_WITH(
      parse_schedule_kind("ZeroBubble"),
      Catch::Contains("Unknown schedule name 'ZeroBubble'") && Catch::Contains("DualPipeV"));
}

TEST_CASE("schedule traits", "[schedule_kind]") {
  CHECK(is_single_stage_per_rank(ScheduleKind::GPipe));
  CHECK(is_single_stage_per_rank(ScheduleKind::OneFOneB));
  CHECK_FALSE(is_single_stage_per_rank(ScheduleKind::Interleaved1F1B));
  CHECK(uses_split_backward(ScheduleKind::ZBVZeroBubble));
  CHECK_FALSE(uses_split_backward(ScheduleKind::LoopedBFS));
  CHECK(placement_of(ScheduleKind::DualPipeV) == Placement::V);
  CHECK(placement_of(ScheduleKind::InterleavedZeroBubble) == Placement::Loop);
  CHECK(default_stages_per_rank(ScheduleKind::GPipe) == 1);
  CHECK(default_stages_per_rank(ScheduleKind::ZBVZeroBubble) == 2);
  for (ScheduleKind kind : {ScheduleKind::VHalf, ScheduleKind::VMin}) {
    CHECK(uses_split_backward(kind));
    CHECK(placement_of(kind) == Placement::V);
    CHECK(default_stages_per_rank(kind) == 2);
    CHECK(stage_to_rank(kind, 3, 2) == std::vector<int>{0, 1, 2, 2, 1, 0});
  }
}

TEST_CASE("stage placement: loop s % p, V r and 2p-1-r", "[schedule_kind]") {
  CHECK(stage_to_rank(ScheduleKind::Interleaved1F1B, 3, 2) == std::vector<int>{0, 1, 2, 0, 1, 2});
  CHECK(stage_to_rank(ScheduleKind::LoopedBFS, 2, 3) == std::vector<int>{0, 1, 0, 1, 0, 1});
  CHECK(stage_to_rank(ScheduleKind::ZBVZeroBubble, 3, 2) == std::vector<int>{0, 1, 2, 2, 1, 0});
  CHECK(stage_to_rank(ScheduleKind::DualPipeV, 4, 2) == std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0});
  CHECK(stage_to_rank(ScheduleKind::OneFOneB, 4, 1) == std::vector<int>{0, 1, 2, 3});
  CHECK_THROWS_WITH(stage_to_rank(ScheduleKind::ZBVZeroBubble, 2, 3),
                    Catch::Contains("exactly 2 stages per rank"));
  CHECK_THROWS_WITH(stage_to_rank(ScheduleKind::GPipe, 2, 2),
                    Catch::Contains("exactly 1 stage per rank"));
  CHECK_THROWS_AS(stage_to_rank(Placement::Loop, 0, 1), std::invalid_argument);
}

TEST_CASE("generate_order dispatches and checks stages per rank", "[schedule_kind]") {
  CHECK(generate_order(ScheduleKind::GPipe, 2, 1, 2).size() == 2);
  CHECK(to_string(generate_order(ScheduleKind::LoopedBFS, 2, 2, 2)[1]) ==
        "1F0 1F1 3F0 3F1 3B1 3B0 1B1 1B0");
  CHECK_THROWS_AS(generate_order(ScheduleKind::DualPipeV, 2, 1, 4), std::invalid_argument);
  CHECK_THROWS_AS(generate_order(ScheduleKind::OneFOneB, 2, 2, 4), std::invalid_argument);
}
