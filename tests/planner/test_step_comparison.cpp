// Tests for tensorplay/pipelining/planner/step_comparison.h: a plan's simulated step set beside a
// measured one.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "synthetic_profile.h"
#include "tensorplay/pipelining/planner/plan_file.h"
#include "tensorplay/pipelining/planner/step_comparison.h"

namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

// 1F1B on 2 ranks, 4 segments of F 1 (I = W = 1, B = 2), cut in the middle, 4 microbatches of
// one sample: each stage's F takes 2 s and B 4 s; the step takes (4 + 1) x 6 = 30 s.
pp::Plan one_f_one_b_plan(const pp::Profile& profile) {
  pp::PlanChoice c;
  c.schedule = sc::ScheduleKind::OneFOneB;
  c.ranks = 2;
  c.n_microbatches = 4;
  c.stage_begin = {0, 2};
  c.recompute = {false, false};
  return pp::make_plan(profile, c, 4);
}

// `step` with every time doubled and put in microseconds: what a run twice as slow would log.
sc::SimulationResult measured_twice_as_slow(sc::SimulationResult step) {
  for (sc::TimelineEvent& e : step.timeline) e.start *= 2e6, e.end *= 2e6;
  for (double& t : step.busy) t *= 2e6;
  for (double& t : step.last_end) t *= 2e6;
  for (double& t : step.idle) t *= 2e6;
  step.makespan *= 2e6;
  return step;
}

}  // namespace

TEST_CASE("a plan's predicted step is the simulator's for its configuration",
          "[planner][step_comparison]") {
  const pp::Profile profile = planner_test::synthetic({1, 1, 1, 1}, 10, 2);
  const sc::SimulationResult step = pp::predict_plan_step(profile, one_f_one_b_plan(profile));
  CHECK(step.makespan == Approx(30));
  CHECK(step.busy == std::vector<double>{24, 24});
  CHECK(step.timeline.size() == 16);
  // 1F1B's rank 0 holds two microbatches of 20 bytes, rank 1 one.
  CHECK(step.peak_activation_bytes == std::vector<double>{40, 20});
  pp::Plan other = one_f_one_b_plan(profile);
  other.split = {"layers.2"};
  CHECK_THROWS_WITH(pp::predict_plan_step(profile, other),
                    Catch::Contains("cuts at 'layers.2'") && Catch::Contains("no segment"));
}

TEST_CASE("a plan run in separate processes is predicted over the ucx channel",
          "[planner][step_comparison]") {
  // The same 1F1B step with a hop of 1 s: four hops lie on its critical path, 30 + 4.
  pp::Profile profile = planner_test::synthetic({1, 1, 1, 1}, 10, 2);
  profile.channels.push_back({"ucx_shm", 1.0, 0.0});
  const pp::Plan plan = one_f_one_b_plan(profile);
  CHECK(pp::predict_plan_step(profile, plan).makespan == Approx(30));
  CHECK(pp::predict_plan_step(profile, plan, /*separate_processes=*/true).makespan == Approx(34));
}

TEST_CASE("compare_step gives each rank's and each kind's figures and errors",
          "[planner][step_comparison]") {
  const pp::Profile profile = planner_test::synthetic({1, 1, 1, 1}, 10, 2);
  const sc::SimulationResult predicted = pp::predict_plan_step(profile, one_f_one_b_plan(profile));
  const sc::SimulationResult measured = measured_twice_as_slow(predicted);
  const pp::StepComparison c = pp::compare_step(predicted, measured, 1e-6, {50, 20});
  CHECK(c.step_seconds.predicted == Approx(30));
  CHECK(c.step_seconds.measured == Approx(60));
  CHECK(c.step_seconds.error() == Approx(-0.5));
  REQUIRE(c.ranks.size() == 2);
  CHECK(c.ranks[1].busy_seconds.measured == Approx(48));
  CHECK(c.ranks[1].busy_seconds.error() == Approx(-0.5));
  CHECK(c.ranks[0].step_seconds.predicted == Approx(30));
  CHECK(c.ranks[1].step_seconds.predicted == Approx(26));  // then rank 0 runs its last B: 4 s
  REQUIRE(c.ranks[0].has_bytes);
  CHECK(c.ranks[0].peak_bytes.error() == Approx(40.0 / 50 - 1));
  CHECK(c.ranks[1].peak_bytes.error() == 0);
  REQUIRE(c.kinds.size() == 2);  // F and B
  CHECK(c.kinds[0].kind == sc::ActionKind::Forward);
  CHECK(c.kinds[0].actions == 8);
  CHECK(c.kinds[0].mean_seconds.predicted == Approx(2));
  CHECK(c.kinds[0].mean_seconds.measured == Approx(4));
  CHECK(c.kinds[1].kind == sc::ActionKind::FullBackward);
  const std::string text = pp::format_step_comparison(c);
  CHECK_THAT(text, Catch::Contains("step 30000000 / 60000000 us (-50.0%)"));
  CHECK_THAT(text, Catch::Contains("rank 0: ") && Catch::Contains("40 / 50 bytes (-20.0%)"));
  CHECK_THAT(text, Catch::Contains("F (8 actions): mean 2000000 / 4000000 us (-50.0%)"));
  // Without the log's memory lines, no bytes are compared.
  CHECK_FALSE(pp::compare_step(predicted, measured, 1e-6).ranks[0].has_bytes);
}

TEST_CASE("compare_step refuses a step of another configuration, naming the difference",
          "[planner][step_comparison]") {
  const pp::Profile profile = planner_test::synthetic({1, 1, 1, 1});
  const sc::SimulationResult predicted = pp::predict_plan_step(profile, one_f_one_b_plan(profile));
  sc::SimulationResult forward_only = predicted;  // an evaluation step: forwards only
  std::erase_if(forward_only.timeline, [](const sc::TimelineEvent& e) {
    return e.action.kind != sc::ActionKind::Forward;
  });
  CHECK_THROWS_WITH(pp::compare_step(predicted, forward_only, 1),
                    Catch::Contains("ran 8 F and the prediction 8 F, 8 B"));
  sc::SimulationResult three_ranks = predicted;
  three_ranks.busy.push_back(0);
  CHECK_THROWS_WITH(pp::compare_step(predicted, three_ranks, 1),
                    Catch::Contains("has 3 ranks and the prediction 2"));
}

TEST_CASE("a figure's error is relative to the measured one", "[planner][step_comparison]") {
  CHECK(pp::ComparedFigure{110, 100}.error() == Approx(0.1));
  CHECK(pp::ComparedFigure{0, 0}.error() == 0);
  CHECK(std::isinf(pp::ComparedFigure{1, 0}.error()));
}
