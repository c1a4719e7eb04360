#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "order_rows.h"
#include "tensorplay/schedules/csv.h"
#include "tensorplay/schedules/generators.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/schedules/validator.h"

using namespace tensorplay::schedules;
using schedules_test::rows;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

TEST_CASE("ZBVZeroBubble p=2 m=4 matches PyTorch", "[generators]") {
  CHECK(rows(zbv_zero_bubble_order(2, 4)) ==
        std::vector<std::string>{
            "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 3W3 0I2 "
            "0W2 0I3 0W3",
            "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 1I2 2I3 1I3 "
            "1W2 2W3 1W3"});
}

TEST_CASE("DualPipeV p=2 m=4 matches PyTorch", "[generators]") {
  CHECK(rows(dualpipev_order(2, 4)) ==
        std::vector<std::string>{
            "0F0 0F1 0F2 3F0 3I0 3W0 3F1 (0F3;3B1)OVERLAP_F_B (3F2;0B0)OVERLAP_F_B 3B2 "
            "(3F3;0B1)OVERLAP_F_B 3B3 0I2 0W2 0I3 0W3",
            "1F0 2F0 1F1 2F1 1F2 2B0 (2F2;1B0)OVERLAP_F_B (1F3;2B1)OVERLAP_F_B "
            "(2F3;1B1)OVERLAP_F_B 2B2 1B2 2I3 1I3 2W3 1W3"});
}

TEST_CASE("Interleaved1F1B p=2 V=2 m=4 matches PyTorch", "[generators]") {
  CHECK(
      rows(interleaved_1f1b_order(2, 2, 4)) ==
      std::vector<std::string>{"0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3",
                               "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3"});
}

TEST_CASE("GPipe and 1F1B orders", "[generators]") {
  CHECK(rows(gpipe_order(2, 3)) ==
        std::vector<std::string>{"0F0 0F1 0F2 0B0 0B1 0B2", "1F0 1F1 1F2 1B0 1B1 1B2"});
  // Warmup p-1-r forwards, then F/B pairs, then the remaining backwards (Megatron's 1F1B, and
  // what PyTorch's Schedule1F1B runs).
  CHECK(rows(one_f_one_b_order(3, 4)) ==
        std::vector<std::string>{"0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3",
                                 "1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3",
                                 "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3"});
}

TEST_CASE("InterleavedZeroBubble with one stage per rank is ZB-H1", "[generators]") {
  PipelineOrder order = interleaved_zero_bubble_order(4, 1, 8);
  CHECK(to_string(order[0]) ==
        "0F0 0F1 0F2 0F3 0I0 0W0 0F4 0I1 0W1 0F5 0I2 0W2 0F6 0I3 0W3 0F7 0I4 0W4 0I5 0W5 0I6 0W6 "
        "0I7 0W7");
  CHECK(to_string(order[3]) ==
        "3F0 3I0 3F1 3I1 3F2 3I2 3F3 3I3 3W0 3F4 3I4 3W1 3F5 3I5 3W2 3F6 3I6 3W3 3F7 3I7 3W4 3W5 "
        "3W6 3W7");
}

TEST_CASE("LoopedBFS runs each local stage breadth first", "[generators]") {
  CHECK(rows(looped_bfs_order(2, 2, 3)) ==
        std::vector<std::string>{"0F0 0F1 0F2 2F0 2F1 2F2 2B2 2B1 2B0 0B2 0B1 0B0",
                                 "1F0 1F1 1F2 3F0 3F1 3F2 3B2 3B1 3B0 1B2 1B1 1B0"});
}

TEST_CASE("DualPipeV p=4 m=10 equals the reference CSV action by action", "[generators]") {
  PipelineOrder expected =
      parse_csv(read_text(std::string(TP_SCHEDULES_TEST_DATA) + "/dualpipev_4rank_10mb.csv"));
  PipelineOrder order = dualpipev_order(4, 10);
  REQUIRE(order.size() == expected.size());
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    INFO("rank " << rank);
    REQUIRE(order[rank].size() == expected[rank].size());
    for (std::size_t i = 0; i < order[rank].size(); ++i) {
      INFO("action " << i);
      CHECK(to_string(order[rank][i]) == to_string(expected[rank][i]));
    }
  }
}

TEST_CASE("orders match PyTorch's generators over a grid of (p, V, m)", "[generators]") {
  // Each line: NAME RANKS V M | rank0 | rank1 ... or NAME RANKS V M | error.
  std::istringstream data(read_text(std::string(TP_SCHEDULES_TEST_DATA) + "/pytorch_orders.txt"));
  std::string line;
  int cases = 0;
  while (std::getline(data, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream head(line.substr(0, line.find('|')));
    std::string name;
    int ranks = 0, v = 0, m = 0;
    head >> name >> ranks >> v >> m;
    std::vector<std::string> expected;
    std::string rest = line.substr(line.find('|') + 1);
    std::size_t start = 0;
    while (start <= rest.size()) {
      std::size_t bar = rest.find('|', start);
      std::string cell =
          rest.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
      cell.erase(0, cell.find_first_not_of(' '));
      cell.erase(cell.find_last_not_of(' ') + 1);
      expected.push_back(cell);
      if (bar == std::string::npos) break;
      start = bar + 1;
    }
    INFO(name << " p=" << ranks << " V=" << v << " m=" << m);
    ScheduleKind kind = parse_schedule_kind(name);
    if (expected.size() == 1 && expected[0] == "error") {
      CHECK_THROWS_AS(generate_order(kind, ranks, v, m), std::invalid_argument);
    } else {
      PipelineOrder order = generate_order(kind, ranks, v, m);
      CHECK(rows(order) == expected);
      std::vector<int> placement = stage_to_rank(kind, ranks, v);
      CHECK_NOTHROW(validate_order(order, ranks * v, m, &placement));
    }
    ++cases;
  }
  CHECK(cases > 500);
}

TEST_CASE("generators reject what PyTorch rejects, saying what to change", "[generators]") {
  CHECK_THROWS_WITH(one_f_one_b_order(4, 3), Catch::Contains("at least as many microbatches"));
  CHECK_THROWS_WITH(dualpipev_order(4, 7),
                    Catch::Contains("at least as many microbatches as stages"));
  CHECK_THROWS_WITH(interleaved_1f1b_order(2, 2, 5),
                    Catch::Contains("multiple of the number of rounds"));
  CHECK_THROWS_WITH(interleaved_zero_bubble_order(4, 2, 9),
                    Catch::Contains("multiple of the number of rounds"));
  CHECK_THROWS_WITH(gpipe_order(0, 4), Catch::Contains("at least 1 rank"));
  CHECK_THROWS_WITH(looped_bfs_order(2, 0, 4), Catch::Contains("at least 1 stage per rank"));
  CHECK_THROWS_WITH(zbv_zero_bubble_order(2, 0), Catch::Contains("at least 1 microbatch"));
  CHECK_NOTHROW(interleaved_1f1b_order(4, 2, 3));  // one round of 3: accepted, as in PyTorch
  CHECK_NOTHROW(zbv_zero_bubble_order(4, 2));      // fewer microbatches than 2p-1: accepted
}

TEST_CASE("every generated order is valid on its placement", "[generators]") {
  for (ScheduleKind kind : all_schedule_kinds()) {
    for (int p = 1; p <= 5; ++p) {
      for (int m = 2 * p; m <= 3 * p; m += p) {
        int v = default_stages_per_rank(kind);
        INFO(schedule_name(kind) << " p=" << p << " m=" << m);
        PipelineOrder order = generate_order(kind, p, v, m);
        std::vector<int> placement = stage_to_rank(kind, p, v);
        CHECK(validate_order(order, p * v, m, &placement) == placement);
      }
    }
  }
}

TEST_CASE("one_f_one_b_rank_order is one row of one_f_one_b_order", "[generators]") {
  for (auto [ranks, n_microbatches] : {std::pair{1, 1}, {2, 4}, {4, 4}, {3, 7}}) {
    const PipelineOrder order = one_f_one_b_order(ranks, n_microbatches);
    for (int rank = 0; rank < ranks; ++rank)
      CHECK(one_f_one_b_rank_order(ranks, rank, n_microbatches) == order[rank]);
  }
  CHECK_THROWS_WITH(one_f_one_b_rank_order(2, 2, 4), Catch::Contains("rank 2 is not in [0, 2)"));
  CHECK_THROWS_WITH(one_f_one_b_rank_order(4, 0, 2),
                    Catch::Contains("at least as many microbatches as stages"));
}

TEST_CASE("VHalf p=2 m=4: one block per microbatch, repeated", "[generators]") {
  CHECK(rows(vhalf_order(2, 4)) ==
        std::vector<std::string>{
            "0F0 3F0 3I0 3W0 0F1 0I0 0W0 3F1 3I1 3W1 0F2 0I1 0W1 3F2 3I2 3W2 0F3 0I2 0W2 3F3 3I3 "
            "3W3 0I3 0W3",
            "1F0 2F0 2I0 1I0 1F1 2F1 2W0 1W0 2I1 1I1 1F2 2F2 2W1 1W1 2I2 1I2 1F3 2F3 2W2 1W2 2I3 "
            "1I3 2W3 1W3"});
}

TEST_CASE("VHalf and VMin are valid on the V placement for any rank and microbatch count",
          "[generators]") {
  for (ScheduleKind kind : {ScheduleKind::VHalf, ScheduleKind::VMin}) {
    for (int p : {1, 2, 3, 4, 5, 6, 8}) {
      for (int m : {1, 3, p, 2 * p, 2 * p + 1, 3 * p, 4 * p - 1}) {
        INFO(schedule_name(kind) << " p=" << p << " m=" << m);
        PipelineOrder order = generate_order(kind, p, 2, m);
        std::vector<int> placement = stage_to_rank(kind, p, 2);
        CHECK(validate_order(order, 2 * p, m, &placement) == placement);
        CHECK_NOTHROW(step_order(order, 2 * p, m));
        for (const RankOrder& rank : order) {
          CHECK(rank.size() == static_cast<std::size_t>(6 * m));  // F, I, W on two stages
          std::map<std::pair<int, int>, int> last;                // (stage, kind) -> microbatch
          for (const Action& a : rank) {
            auto [it, fresh] = last.try_emplace({a.stage, static_cast<int>(a.kind)}, -1);
            CHECK(a.microbatch == it->second + 1);  // each stage takes microbatches in order
            it->second = a.microbatch;
          }
        }
      }
    }
  }
}

TEST_CASE("VHalf and VMin check their sizes like the other generators", "[generators]") {
  CHECK_THROWS_WITH(vhalf_order(0, 4), Catch::Contains("VHalf needs at least 1 rank"));
  CHECK_THROWS_WITH(vmin_order(2, 0), Catch::Contains("VMin needs at least 1 microbatch"));
  CHECK_THROWS_WITH(generate_order(ScheduleKind::VMin, 2, 1, 4),
                    Catch::Contains("exactly 2 stages per rank"));
}
