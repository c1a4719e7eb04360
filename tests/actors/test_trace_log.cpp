// Tests for trace_log.h: parsing message-log lines, rebuilding a step's timeline and its figures,
// and reading back the log of a real 1F1B step.
#include <catch2/catch.hpp>
#include <sstream>

#include "actors/schedule.h"
#include "actors/trace_log.h"
#include "log_capture.h"
#include "tensors/tensors.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

namespace {
std::vector<pp::LogEvent> parse(const std::string& text) {
  std::istringstream in(text);
  return pp::parse_message_log(in);
}
}  // namespace

TEST_CASE("message-log lines parse, other lines are skipped", "[trace_log]") {
  auto events = parse(
      "step 1 loss 0.5\n"
      "[12:00:00.000001] [tensorplay] rank=1 step=3 event=recv what=input 1:0 t_us=100\n"
      "[12:00:00.000002] [tensorplay] rank=1 step=3 event=start what=1F0 t_us=105\n"
      "rank=0 step=3 event=send what=grad 0:1 t_us=107\n");
  REQUIRE(events.size() == 3);
  CHECK(events[0].rank == 1);
  CHECK(events[0].step == 3);
  CHECK(events[0].event == "recv");
  CHECK(events[0].what == "input 1:0");
  CHECK(events[0].t_us == 100);
  CHECK(events[1].what == "1F0");
  CHECK(events[2].rank == 0);
  CHECK(pp::logged_steps(events) == std::vector<uint64_t>{3});
  CHECK_THROWS_WITH(parse("a\nrank=x step=1 event=start what=0F0 t_us=1\n"),
                    Catch::Contains("line 2") && Catch::Contains("rank='x'"));
  CHECK_THROWS_WITH(parse("rank=-1 step=0 event=start what=0F0 t_us=1\n"),
                    Catch::Contains("line 1: rank=-1 is outside"));
  CHECK_THROWS_WITH(parse("rank=4294967296 step=0 event=start what=0F0 t_us=1\n"),
                    Catch::Contains("is outside"));
}

TEST_CASE("a step's timeline has the simulator's figures", "[trace_log]") {
  // Rank 0: F0 [0,10), F1 [10,20), B0 [30,40), B1 [40,50). Rank 1: F0 [12,22), B0 [22,30).
  auto events = parse(
      "rank=0 step=7 event=start what=0F0 t_us=1000\nrank=0 step=7 event=finish what=0F0 "
      "t_us=1010\n"
      "rank=0 step=7 event=start what=0F1 t_us=1010\nrank=0 step=7 event=finish what=0F1 "
      "t_us=1020\n"
      "rank=1 step=7 event=start what=1F0 t_us=1012\nrank=1 step=7 event=finish what=1F0 "
      "t_us=1022\n"
      "rank=1 step=7 event=start what=1B0 t_us=1022\nrank=1 step=7 event=finish what=1B0 "
      "t_us=1030\n"
      "rank=0 step=7 event=start what=0B0 t_us=1030\nrank=0 step=7 event=finish what=0B0 "
      "t_us=1040\n"
      "rank=0 step=7 event=start what=0B1 t_us=1040\nrank=0 step=7 event=finish what=0B1 "
      "t_us=1050\n"
      "rank=0 step=8 event=start what=0F0 t_us=2000\n");
  tensorplay::schedules::SimulationResult r = pp::step_timeline(events, 7);
  CHECK(r.actions == 6);
  CHECK(r.makespan == 50);
  CHECK(r.busy == std::vector<double>{40, 18});
  CHECK(r.idle == std::vector<double>{10, 32});
  CHECK(r.bubble_fraction == Approx(42.0 / 100));
  CHECK(r.peak_activations == std::vector<int>{2, 1});
  CHECK(r.timeline.front().start == 0);
  CHECK(r.span == 50);
  CHECK_THROWS_WITH(pp::step_timeline(events, 8),
                    Catch::Contains("rank 0 started 0F0 and never finished"));
  CHECK_THROWS_WITH(pp::step_timeline(events, 9), Catch::Contains("no start/finish events"));
  auto twice = parse(
      "rank=0 step=1 event=start what=0F0 t_us=1\nrank=0 step=1 event=start what=0F0 t_us=2\n");
  CHECK_THROWS_WITH(pp::step_timeline(twice, 1), Catch::Contains("started 0F0 twice"));
}

TEST_CASE("the log of a real 1F1B step reads back as its timeline", "[trace_log]") {
  std::string log = log_capture::capture_message_log(
      [] {
        std::vector<std::shared_ptr<pp::PipelineStage>> stages;
        for (int i = 0; i < 2; ++i)
          stages.push_back(
              std::make_shared<pp::PipelineStage>(tp::nn::Linear(8, 8).ptr(), i, 2, tp::cpu(),
                                                  std::vector<tp::Tensor>{tp::zeros({2, 8})}));
        pp::Schedule1F1B schedule(stages, 4, tp::nn::mse_loss);
        schedule.step({tp::randn({8, 8})}, {.target = tp::randn({8, 8})});
      },
      /*debug=*/true);
  std::istringstream in(log);
  auto events = pp::parse_message_log(in);
  REQUIRE(pp::logged_steps(events).size() == 1);
  auto r = pp::step_timeline(events, pp::logged_steps(events).front());
  CHECK(r.actions == 16);  // a forward and a backward per microbatch and stage
  REQUIRE(r.busy.size() == 2);
  for (int rank = 0; rank < 2; ++rank) {
    double last_end = -1;
    for (const auto& e : r.timeline) {
      if (e.rank != rank) continue;
      CHECK(e.start >= last_end);  // one action at a time per rank
      CHECK(e.end >= e.start);
      last_end = e.end;
    }
  }
  // 1F1B on 2 stages: rank 0 holds at most 2 activations, the last rank 1.
  CHECK(r.peak_activations == std::vector<int>{2, 1});
  CHECK(r.bubble_fraction >= 0.0);
  CHECK(r.bubble_fraction < 1.0);
}
