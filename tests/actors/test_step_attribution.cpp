// Tests for step_attribution.h: a hand-made step split into compute, bubble, hand-offs and the
// runtime, the mean of several steps, and the attribution of a real step read from its log.
#include <catch2/catch.hpp>
#include <sstream>

#include "log_capture.h"
#include "tensorplay/observe/step_attribution.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

namespace {

// One microbatch through two stages: F 10 us and B 20 us each. Rank 1's forward starts 10 us
// after its input was sent (it arrived after 4), rank 0's backward 5 us after its gradient was
// sent (arrived after 1). Ideal: 0F0 0-10, 1F0 10-20, 1B0 20-40, 0B0 40-60.
const char* kStep =
    "rank=0 step=1 event=recv what=step t_us=1000\n"
    "rank=1 step=1 event=recv what=step t_us=1000\n"
    "rank=0 step=1 event=start what=0F0 t_us=1000\n"
    "rank=0 step=1 event=send what=input 1:0 t_us=1010\n"
    "rank=0 step=1 event=finish what=0F0 t_us=1010\n"
    "rank=1 step=1 event=recv what=input 1:0 t_us=1014\n"
    "rank=1 step=1 event=start what=1F0 t_us=1020\n"
    "rank=1 step=1 event=finish what=1F0 t_us=1030\n"
    "rank=1 step=1 event=start what=1B0 t_us=1030\n"
    "rank=1 step=1 event=send what=grad 0:0 t_us=1050\n"
    "rank=1 step=1 event=finish what=1B0 t_us=1050\n"
    "rank=1 step=1 event=sched what=cpu_us:30 runnable_us:7 t_us=1051\n"
    "rank=1 step=1 event=done what=step t_us=1051\n"
    "rank=0 step=1 event=recv what=grad 0:0 t_us=1051\n"
    "rank=0 step=1 event=start what=0B0 t_us=1055\n"
    "rank=0 step=1 event=finish what=0B0 t_us=1075\n"
    "rank=0 step=1 event=done what=step t_us=1076\n";

std::vector<pp::LogEvent> parse(const std::string& text) {
  std::istringstream in(text);
  return pp::parse_message_log(in);
}

}  // namespace

TEST_CASE("a step splits into compute, the schedule's bubble, hand-offs and the runtime",
          "[step_attribution]") {
  const pp::StepAttribution a = pp::attribute_step(parse(kStep), 1);
  CHECK(a.makespan_us == 75);
  CHECK(a.ideal_makespan_us == 60);
  CHECK(a.step_span_us == 76);  // the step messages at 1000 to the last done at 1076
  REQUIRE(a.ranks.size() == 2);
  const pp::RankAttribution& r0 = a.ranks[0];
  CHECK(r0.compute_us == 30);
  CHECK(r0.bubble_us == 30);
  CHECK(r0.handoff_us == 5);  // grad sent at 50, 0B0 started at 55
  CHECK(r0.transfer_us == 1);
  CHECK(r0.dispatch_us == 4);
  CHECK(r0.handoffs == 1);
  CHECK(r0.runtime_us == 10);   // rank 1's late forward, passed on
  CHECK(r0.runnable_us == -1);  // no sched line
  const pp::RankAttribution& r1 = a.ranks[1];
  CHECK(r1.compute_us == 30);
  CHECK(r1.bubble_us == 30);
  CHECK(r1.handoff_us == 10);  // input sent at 10, 1F0 started at 20
  CHECK(r1.transfer_us == 4);
  CHECK(r1.dispatch_us == 6);
  CHECK(r1.runtime_us == 5);
  CHECK(r1.thread_cpu_us == 30);
  CHECK(r1.runnable_us == 7);
  for (const auto& r : a.ranks)
    CHECK(r.compute_us + r.bubble_us + r.handoff_us + r.runtime_us == Approx(r.step_us));

  const std::string text = pp::format_attribution(a);
  CHECK_THAT(text, Catch::Contains("step 75 us against the schedule's 60 us on the same action "
                                   "times (step() inside the runtime: 76 us)"));
  CHECK_THAT(text, Catch::Contains("rank 1: compute 30 + bubble 30 + hand-off 10 (transfer 4, "
                                   "dispatch 6, 1 waits) + runtime 5 us"));
  CHECK_THAT(text, Catch::Contains("runnable, not running 7 us"));
  CHECK_THAT(pp::attribution_json(a), Catch::Contains("\"handoff_us\":10"));
}

TEST_CASE("an input that arrived before its rank was free is no hand-off", "[step_attribution]") {
  // Rank 1 is still busy with 1F0 when the input of 1F1 arrives: the gap before 1F1 is the
  // runtime's, not a wait for the other rank.
  const std::string log =
      "rank=0 step=2 event=start what=0F0 t_us=0\n"
      "rank=0 step=2 event=send what=input 1:0 t_us=10\n"
      "rank=0 step=2 event=finish what=0F0 t_us=10\n"
      "rank=0 step=2 event=start what=0F1 t_us=10\n"
      "rank=0 step=2 event=send what=input 1:1 t_us=20\n"
      "rank=0 step=2 event=finish what=0F1 t_us=20\n"
      "rank=1 step=2 event=recv what=input 1:0 t_us=11\n"
      "rank=1 step=2 event=recv what=input 1:1 t_us=21\n"
      "rank=1 step=2 event=start what=1F0 t_us=11\n"
      "rank=1 step=2 event=finish what=1F0 t_us=40\n"
      "rank=1 step=2 event=start what=1F1 t_us=43\n"
      "rank=1 step=2 event=finish what=1F1 t_us=50\n";
  const pp::StepAttribution a = pp::attribute_step(parse(log), 2);
  REQUIRE(a.ranks.size() == 2);
  CHECK(a.ranks[1].handoffs == 1);  // only 1F0 waited
  CHECK(a.ranks[1].handoff_us == 1);
}

TEST_CASE("the mean of several steps' attributions", "[step_attribution]") {
  pp::StepAttribution one = pp::attribute_step(parse(kStep), 1), two = one;
  two.makespan_us = 85;
  two.ranks[0].handoff_us = 15;
  const pp::StepAttribution mean = pp::mean_attribution({one, two});
  CHECK(mean.makespan_us == 80);
  CHECK(mean.ranks[0].handoff_us == 10);
  CHECK(mean.ranks[1].runnable_us == 7);
  CHECK_THROWS_WITH(pp::mean_attribution({}), Catch::Contains("no steps"));
  CHECK_THROWS(pp::attribute_step(parse(kStep), 2));  // a step the log does not hold
}

TEST_CASE("a real 1F1B step's attribution adds up to its makespan", "[step_attribution]") {
  const std::string log = log_capture::capture_message_log(
      [] {
        std::vector<std::shared_ptr<pp::PipelineStage>> stages;
        for (int i = 0; i < 2; ++i)
          stages.push_back(
              std::make_shared<pp::PipelineStage>(tp::nn::Linear(64, 64).ptr(), i, 2, tp::cpu(),
                                                  std::vector<tp::Tensor>{tp::zeros({4, 64})}));
        pp::Schedule1F1B schedule(stages, 4, tp::nn::mse_loss);
        schedule.step({tp::randn({16, 64})}, {.target = tp::randn({16, 64})});
      },
      /*debug=*/true);
  const std::vector<pp::LogEvent> events = parse(log);
  REQUIRE(pp::logged_steps(events).size() == 1);
  const pp::StepAttribution a = pp::attribute_step(events, pp::logged_steps(events).front());
  REQUIRE(a.ranks.size() == 2);
  CHECK(a.ideal_makespan_us > 0);
  // The replay runs each stage's mean action times, so it is no lower bound on one step: a step
  // whose slow actions fell off its critical path beats it (2% under load), and a loaded machine
  // stretches the step far past it. Some action runs at every moment of the replay, so it takes
  // at most the work of all ranks together.
  double work_us = 0;
  for (const auto& r : a.ranks) work_us += r.compute_us;
  CHECK(a.ideal_makespan_us <= work_us + 1);
  for (const auto& r : a.ranks) {
    CHECK(r.compute_us > 0);
    CHECK(r.bubble_us >= 0);
    CHECK(r.handoff_us >= 0);
    CHECK(r.compute_us + r.bubble_us + r.handoff_us + r.runtime_us == Approx(r.step_us));
  }
  // Rank 1 waits on rank 0's first output: a hand-off (the stages talk in one process).
  CHECK(a.ranks[1].handoffs >= 1);
}
