// Tests for tensorplay/pipelining/planner/calibrate.h: the fit on synthetic measured timelines (a
// known compute factor and per-action time recovered), and one real run of a small GPT calibrating
// its profile.
#include <catch2/catch.hpp>

#include "synthetic_profile.h"
#include "tensorplay/nn/gpt.h"
#include "tensorplay/pipelining/planner/calibrate.h"
#include "tensorplay/pipelining/planner/detail/plan_costs.h"
#include "tensorplay/pipelining/planner/plan.h"
#include "tensorplay/pipelining/planner/profile_run.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

// Two ranks, `microbatches` of one sample each, the schedule's default stages per rank, an even
// cut of the profile's segments.
pp::PlanChoice two_ranks(sc::ScheduleKind kind, int n_microbatches, int segments) {
  pp::PlanChoice c;
  c.schedule = kind;
  c.ranks = 2;
  c.stages_per_rank = sc::default_stages_per_rank(kind);
  c.n_microbatches = n_microbatches;
  c.stage_begin = pp::detail::even_stage_begins(segments, c.num_stages());
  c.recompute.assign(c.num_stages(), false);
  return c;
}

// A measured step as the runtime logs it, made by the simulator from `truth` (its compute
// factor and time per action): each action's finish is logged before the runtime's share of
// it (messages, scheduling), which falls between the actions.
sc::SimulationResult measured_timeline(const pp::Profile& truth, const pp::PlanRequest& request,
                                       const pp::PlanChoice& c) {
  sc::SimulationResult r = pp::simulate_choice(truth, request, c);
  for (sc::TimelineEvent& e : r.timeline) e.end -= truth.action_overhead;
  return r;
}

// A two-block GPT of vocabulary 11 and context 8, with what profiling it takes: its loss, the
// options (its blocks as candidates, microbatches of 2 samples) and an example microbatch.
struct SmallGpt {
  static constexpr int64_t vocab = 11;
  static tp::nn::GPT seeded() {
    tp::manual_seed(0);
    return tp::nn::GPT(tp::nn::GPTConfig{
        .vocab_size = vocab, .context_length = 8, .n_layer = 2, .n_head = 2, .width = 16});
  }
  tp::nn::GPT model = seeded();
  pp::LossFn loss = [](const tp::Tensor& logits, const tp::Tensor& targets) {
    return tp::cross_entropy(logits.reshape({-1, vocab}), targets.reshape({-1}));
  };
  std::vector<tp::Tensor> example = {tp::zeros({2, 8})};
  pp::ProfileOptions options() const {
    pp::ProfileOptions o;
    o.candidates = {"blocks.0", "blocks.1"};
    o.repeats = 1;
    o.loss_fn = loss;
    o.target = tp::zeros({2, 8});
    return o;
  }
};

}  // namespace

TEST_CASE("the fit recovers a known compute factor and time per action", "[planner][calibrate]") {
  pp::Profile truth = planner_test::synthetic({2e-3, 3e-3, 3e-3, 2e-3});
  truth.compute_factor = 1.7;
  truth.action_overhead = 80e-6;
  const pp::PlanRequest request{.world = 2, .batch = 4};
  const pp::PlanChoice c = two_ranks(sc::ScheduleKind::OneFOneB, 4, 4);
  const sc::SimulationResult measured = measured_timeline(truth, request, c);
  pp::Profile profiled = truth;  // what profiling saw: compute alone, no runtime
  profiled.compute_factor = 1;
  profiled.action_overhead = 0;
  const pp::CalibrationFit fit =
      pp::fit_calibration(profiled, request, c, measured, measured.makespan);
  CHECK(fit.compute_factor == Approx(1.7).epsilon(1e-3));
  CHECK(fit.action_overhead == Approx(80e-6).epsilon(0.01));
  CHECK(fit.measured_step == measured.makespan);
  CHECK(fit.predicted_step < measured.makespan);  // uncalibrated: too fast
  CHECK(fit.calibrated_step == Approx(measured.makespan).epsilon(1e-6));
  CHECK(fit.measured_compute / fit.predicted_compute == Approx(1.7).epsilon(1e-3));

  // Calibrated on 1F1B, the profile predicts ZBV (three actions per microbatch and stage, two
  // stages per rank); charging all the slow compute per action (the earlier model) does not.
  pp::Profile calibrated = profiled, overhead_only = profiled;
  calibrated.compute_factor = fit.compute_factor;
  calibrated.action_overhead = fit.action_overhead;
  overhead_only.action_overhead = fit.overhead_only;
  CHECK(fit.overhead_only > 10 * fit.action_overhead);
  const pp::PlanChoice zbv = two_ranks(sc::ScheduleKind::ZBVZeroBubble, 8, 4);
  const double actual = pp::predict(truth, request, zbv).step_seconds;
  CHECK(pp::predict(calibrated, request, zbv).step_seconds == Approx(actual).epsilon(0.01));
  CHECK(pp::predict(overhead_only, request, zbv).step_seconds > 1.15 * actual);
}

TEST_CASE("the fit keeps a zero time per action when compute explains the step",
          "[planner][calibrate]") {
  pp::Profile truth = planner_test::synthetic({1e-3, 1e-3});
  truth.compute_factor = 2.5;
  const pp::PlanRequest request{.world = 2, .batch = 4};
  const pp::PlanChoice c = two_ranks(sc::ScheduleKind::OneFOneB, 4, 2);
  const sc::SimulationResult measured = measured_timeline(truth, request, c);
  pp::Profile profiled = truth;
  profiled.compute_factor = 1;
  const pp::CalibrationFit fit =
      pp::fit_calibration(profiled, request, c, measured, measured.makespan);
  CHECK(fit.compute_factor == Approx(2.5).epsilon(1e-3));
  CHECK(fit.action_overhead == Approx(0).margin(1e-7));
  CHECK(fit.calibrated_step == Approx(measured.makespan).epsilon(1e-6));
  // A step measured faster than its actions' durations make it in the simulator (a loaded host,
  // where a rank computes faster while the other idles): the factor is lowered to match the
  // step, the time per action stays 0.
  const pp::CalibrationFit faster =
      pp::fit_calibration(profiled, request, c, measured, 0.5 * measured.makespan);
  CHECK(faster.action_overhead == 0);
  CHECK(faster.calibrated_step == Approx(0.5 * measured.makespan).epsilon(1e-6));
  CHECK(faster.compute_factor == Approx(1.25).epsilon(1e-3));  // compute scales the whole step
  CHECK(faster.measured_compute / faster.predicted_compute == Approx(2.5).epsilon(1e-3));
}

TEST_CASE("the fit refuses a timeline that does not belong to the configuration",
          "[planner][calibrate]") {
  const pp::Profile p = planner_test::synthetic({1e-3, 1e-3});
  const pp::PlanRequest request{.world = 2, .batch = 4};
  const pp::PlanChoice c = two_ranks(sc::ScheduleKind::OneFOneB, 4, 2);
  CHECK_THROWS_WITH(pp::fit_calibration(p, request, c, sc::SimulationResult{}, 1.0),
                    Catch::Contains("no actions"));
  sc::SimulationResult other = pp::simulate_choice(p, request, c);
  other.timeline.front().action.stage = 5;
  CHECK_THROWS_WITH(pp::fit_calibration(p, request, c, other, 1.0),
                    Catch::Contains("not an action of") && Catch::Contains("1F1B"));
}

TEST_CASE("calibration makes the simulator's step match a real run", "[planner][calibrate]") {
  SmallGpt gpt;
  tp::nn::GPT& model = gpt.model;
  const pp::LossFn& loss = gpt.loss;
  const std::vector<tp::Tensor>& example = gpt.example;
  pp::ProfileOptions o = gpt.options();
  pp::Profile profile = pp::profile(*model.ptr(), example, o);
  const std::vector<float> before = model->parameters().front().to_vector();
  const pp::CalibrationFit fit =
      pp::calibrate_profile(profile, *model.ptr(), example, {.loss_fn = loss, .target = o.target});
  const double measured = fit.measured_step;
  CHECK(measured > 0);
  CHECK(profile.action_overhead == fit.action_overhead);
  CHECK(profile.action_overhead >= 0);
  CHECK(profile.compute_factor == fit.compute_factor);
  CHECK(fit.measured_compute > 0);  // the run's actions, read from its message log
  // The factor is the actions' measured over predicted durations, lowered (with no time per
  // action) where the step, on a loaded host, ran faster than its actions add up to.
  const double ratio = fit.measured_compute / fit.predicted_compute;
  CHECK(fit.compute_factor <= Approx(ratio));
  if (fit.compute_factor < ratio * (1 - 1e-6)) CHECK(fit.action_overhead == 0);
  CHECK(model->parameters().front().to_vector() == before);  // nothing trained
  pp::PlanChoice c;
  c.schedule = tensorplay::schedules::ScheduleKind::OneFOneB;
  c.ranks = 2;
  c.n_microbatches = 4;
  std::vector<double> costs;
  for (const auto& s : profile.segments) costs.push_back(s.forward + s.full_backward);
  c.stage_begin = pp::balanced_stage_begins(costs, 2);
  const pp::PlanChoice p = pp::predict(profile, {.world = 2, .batch = 8}, c);
  const double predicted = p.step_seconds - p.optimizer_seconds;  // the run had no optimizer
  CHECK(p.optimizer_seconds > 0);
  CHECK(predicted == Approx(measured).epsilon(0.01));  // the calibration run, predicted exactly
  pp::Profile one = profile;
  one.segments.resize(1);
  CHECK_THROWS_WITH(
      pp::calibrate_profile(one, *model.ptr(), example, {.loss_fn = loss, .target = o.target}),
      Catch::Contains("at least 2 segments"));
}

TEST_CASE("calibration fits a compute factor at each larger microbatch the profile measured",
          "[planner][calibrate]") {
  SmallGpt gpt;
  tp::nn::GPT& model = gpt.model;
  const pp::LossFn& loss = gpt.loss;
  const std::vector<tp::Tensor>& example = gpt.example;
  pp::ProfileOptions o = gpt.options();
  o.larger_microbatches = {2};
  const pp::Profile measured = pp::profile(*model.ptr(), example, o);
  pp::Profile profile = measured;
  const pp::CalibrationFit fit =
      pp::calibrate_profile(profile, *model.ptr(), example, {.loss_fn = loss, .target = o.target});
  REQUIRE(fit.larger_compute_factors.size() == 1);
  CHECK(fit.larger_compute_factors[0].samples == 4);  // twice the example's 2 samples
  CHECK(fit.larger_compute_factors[0].compute_factor > 0);
  REQUIRE(fit.larger_measured_steps.size() == 1);
  CHECK(fit.larger_measured_steps[0] > 0);
  REQUIRE(profile.larger_compute_factors.size() == 1);
  CHECK(profile.larger_compute_factors[0].compute_factor ==
        fit.larger_compute_factors[0].compute_factor);
  CHECK(profile.compute_factor_at(4) == fit.larger_compute_factors[0].compute_factor);
  pp::Profile one_size = measured;  // larger sizes not asked for: the one factor only
  const pp::CalibrationFit alone =
      pp::calibrate_profile(one_size, *model.ptr(), example,
                            {.loss_fn = loss, .target = o.target, .larger_sizes = false});
  CHECK(alone.larger_compute_factors.empty());
  CHECK(one_size.larger_compute_factors.empty());
}
