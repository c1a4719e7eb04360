#include <catch2/catch.hpp>

#include "tensorplay/schedules/format.h"

using namespace tensorplay::schedules;

TEST_CASE("the step table has a row per step and a column per rank", "[format]") {
  PipelineOrder order = {parse_rank_order("0F0 0F1 0B0 0B1"), parse_rank_order("1F0 1B0")};
  std::string table = format_pipeline_order(order);
  CHECK(table ==
        "        Rank 0 Rank 1\n"
        "Step 0: 0F0    1F0   \n"
        "Step 1: 0F1    1B0   \n"
        "Step 2: 0B0          \n"
        "Step 3: 0B1          \n");
}

TEST_CASE("bubbles are blank and the failing step is marked", "[format]") {
  SteppedOrder order(2);
  order[0] = {make_action(0, ActionKind::Forward, 0), std::nullopt,
              make_action(0, ActionKind::FullBackward, 0)};
  order[1] = {std::nullopt, make_action(1, ActionKind::Forward, 0),
              make_action(1, ActionKind::FullBackward, 0)};
  std::string table = format_pipeline_order(order, 1);
  CHECK(table.find("Step 1:        1F0    <-- ERROR HERE\n") != std::string::npos);
  CHECK(table.find("Step 0: 0F0") != std::string::npos);
}

TEST_CASE("step labels are zero padded to the widest step", "[format]") {
  RankOrder many;
  for (int mb = 0; mb < 11; ++mb) many.push_back(make_action(0, ActionKind::Forward, mb));
  std::string table = format_pipeline_order(PipelineOrder{many});
  CHECK(table.find("Step 00: 0F0") != std::string::npos);
  CHECK(table.find("Step 10: 0F10") != std::string::npos);
}
