#include <catch2/catch.hpp>
#include <cstdio>

#include "tensorplay/schedules/csv.h"
#include "tensorplay/schedules/lowering.h"
#include "tensorplay/schedules/schedule_kind.h"

using namespace tensorplay::schedules;

TEST_CASE("CSV dump is one row per rank, one action per cell", "[csv]") {
  PipelineOrder order = {parse_rank_order("0F0 (0F1;3B0)OVERLAP_F_B"), parse_rank_order("1F0")};
  CHECK(dump_csv(order) == "0F0,(0F1;3B0)OVERLAP_F_B\n1F0\n");
}

TEST_CASE("CSV dump then load round-trips every generated order", "[csv]") {
  for (ScheduleKind kind : all_schedule_kinds()) {
    for (int p : {1, 2, 3, 4}) {
      int v = default_stages_per_rank(kind);
      for (int m : {2 * p, 2 * p + 2, 4 * p}) {
        INFO(schedule_name(kind) << " p=" << p << " m=" << m);
        PipelineOrder order = generate_order(kind, p, v, m);
        CHECK(parse_csv(dump_csv(order)) == order);
        PipelineOrder lowered = lower_to_communication(order, stage_to_rank(kind, p, v));
        CHECK(parse_csv(dump_csv(lowered), CsvFormat::WithCommunication) == lowered);
      }
    }
  }
}

TEST_CASE("CSV parsing accepts CRLF, quotes and empty cells", "[csv]") {
  PipelineOrder order = parse_csv("0F0,,0B0\r\n\"1F0\", 1B0\r\n");
  REQUIRE(order.size() == 2);
  CHECK(to_string(order[0]) == "0F0 0B0");
  CHECK(to_string(order[1]) == "1F0 1B0");
}

TEST_CASE("CSV errors name the row and column", "[csv]") {
  CHECK_THROWS_WITH(parse_csv("0F0,0B0\n1F0,1Q0\n"),
                    Catch::Contains("CSV row 1") && Catch::Contains("column 1"));
  CHECK_THROWS_WITH(parse_csv("0F0,0SEND_F0\n"),
                    Catch::Contains("expected a compute-only schedule"));
  CHECK_NOTHROW(parse_csv("0F0,0SEND_F0\n", CsvFormat::WithCommunication));
  CHECK_THROWS_WITH(load_csv("/nonexistent/order.csv"), Catch::Contains("cannot read"));
}

TEST_CASE("CSV files save and load", "[csv]") {
  std::string path = "test_schedules_roundtrip.csv";
  PipelineOrder order = generate_order(ScheduleKind::DualPipeV, 2, 2, 4);
  save_csv(path, order);
  CHECK(load_csv(path) == order);
  std::remove(path.c_str());
}
