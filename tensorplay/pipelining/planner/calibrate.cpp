// calibrate_profile and fit_calibration (calibrate.h): real 1F1B runs with their message logs
// captured; the actions' durations give the compute factor, a bisection the per-action time.
#include "tensorplay/pipelining/planner/calibrate.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "tensorplay/observe/message_log.h"
#include "tensorplay/observe/trace_log.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/planner/detail/plan_costs.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tensorplay::pipelining {
namespace {

// The calibration's configuration: 1F1B on two ranks, cut balanced on the profile.
PlanChoice calibration_choice(const Profile& profile, int n_microbatches) {
  PlanChoice c;
  c.schedule = schedules::ScheduleKind::OneFOneB;
  c.ranks = 2;
  c.n_microbatches = n_microbatches;
  c.stage_begin = balanced_stage_begins(detail::segment_costs(profile), 2);
  c.recompute = {false, false};
  c.cut = "balanced";
  return c;
}

std::vector<Tensor> repeated(const std::vector<Tensor>& tensors, int times) {
  std::vector<Tensor> out;
  for (const Tensor& t : tensors) out.push_back(cat(std::vector<Tensor>(times, t), 0));
  return out;
}

// The timed steps of one run, with the message log captured: each one's wall seconds and the log.
struct MeasuredRun {
  std::vector<double> seconds;  ///< per timed step, after one warm-up step
  std::string log;
};

MeasuredRun measured_run(const Profile& profile, nn::Module& model, const PlanChoice& c,
                         const std::vector<Tensor>& example, const CalibrationOptions& o) {
  PipelineOptions cut;
  cut.split_spec[profile.segments.at(c.stage_begin[1]).name] = SplitPoint::Beginning;
  Pipe pipe = pipeline(model, example, cut);
  auto stages = build_stages(pipe, {cpu()});
  for (auto& stage : stages) stage->set_num_threads(1);  // as the profile measured
  PipelineSchedule schedule(stages, c.n_microbatches, o.loss_fn, c.schedule);
  optim::SGD zero(parameters(stages), {.lr = 0.0f});
  const std::vector<Tensor> inputs = repeated(example, c.n_microbatches);
  const Tensor target = repeated({o.target}, c.n_microbatches).front();
  MeasuredRun run;
  run.log = capture_message_log([&] {
    for (int i = 0; i <= std::max(1, o.steps); ++i) {
      const auto start = std::chrono::steady_clock::now();
      schedule.step(inputs, {.target = target});
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (i > 0) run.seconds.push_back(seconds);  // the first step warms up
      zero.zero_grad();
    }
  });
  return run;
}

// The fastest timed step of `run`: its wall seconds, and its actions from the log (seconds).
std::pair<double, schedules::SimulationResult> fastest_step(const MeasuredRun& run) {
  std::istringstream in(run.log);
  const std::vector<LogEvent> events = parse_message_log(in);
  std::set<uint64_t> numbers;  // the log's steps: the warm-up's, then the timed ones
  for (const LogEvent& e : events)
    if (e.event == "start") numbers.insert(e.step);
  if (numbers.size() != run.seconds.size() + 1)
    throw std::runtime_error("calibrate_profile: the message log holds " +
                             std::to_string(numbers.size()) + " steps, expected " +
                             std::to_string(run.seconds.size() + 1));
  const size_t best = static_cast<size_t>(std::min_element(run.seconds.begin(), run.seconds.end()) -
                                          run.seconds.begin());
  schedules::SimulationResult r = step_timeline(events, *std::next(numbers.begin(), best + 1));
  for (auto& e : r.timeline) e.start *= 1e-6, e.end *= 1e-6;  // microseconds to seconds
  r.makespan *= 1e-6;
  return {run.seconds[best], std::move(r)};
}

// The simulated step of `c` on `p`, the pipeline's alone: a measured step has no optimizer.
double pipeline_step(const Profile& p, const PlanRequest& request, const PlanChoice& c) {
  const PlanChoice predicted = predict(p, request, c);
  return predicted.step_seconds - predicted.optimizer_seconds;
}

// The time per action that makes the simulator's pipeline step of `c` on `p` (its compute
// factor as set) equal `measured_step`: 0 when it is already as slow.
double overhead_matching(Profile p, const PlanRequest& request, const PlanChoice& c,
                         double measured_step) {
  p.action_overhead = 0;
  if (pipeline_step(p, request, c) >= measured_step) return 0;
  double low = 0, high = measured_step;  // the simulator's step grows with the overhead
  for (int i = 0; i < 40; ++i) {
    p.action_overhead = (low + high) / 2;
    (pipeline_step(p, request, c) < measured_step ? low : high) = p.action_overhead;
  }
  return low;
}

// The compute factor at most `factor` whose simulated pipeline step of `c` on `p` (no time per
// action) is not above `measured_step`.
double factor_within(Profile p, const PlanRequest& request, const PlanChoice& c, double factor,
                     double measured_step) {
  p.action_overhead = 0;
  p.compute_factor = factor;
  if (pipeline_step(p, request, c) <= measured_step) return factor;
  double low = 0, high = factor;  // the simulator's step grows with the factor
  for (int i = 0; i < 40; ++i) {
    p.compute_factor = (low + high) / 2;
    (pipeline_step(p, request, c) <= measured_step ? low : high) = p.compute_factor;
  }
  return std::max(low, 1e-6);  // a factor must stay above 0
}

// The larger microbatches the profile's segments were all measured at that are whole multiples
// of its microbatch (calibrate_profile runs copies of the example microbatch), ascending.
std::vector<int64_t> larger_sizes(const Profile& profile) {
  std::vector<int64_t> sizes;
  for (const SizedTimes& t : profile.segments.front().larger) {
    const bool everywhere = std::all_of(
        profile.segments.begin(), profile.segments.end(), [&t](const SegmentProfile& s) {
          return std::any_of(s.larger.begin(), s.larger.end(),
                             [&t](const SizedTimes& u) { return u.samples == t.samples; });
        });
    if (everywhere && t.samples % profile.microbatch_size == 0) sizes.push_back(t.samples);
  }
  return sizes;
}

// One calibration run of `c` on microbatches of `times` copies of `example` (and of the target),
// fitted against `profile` at that size.
CalibrationFit fit_at(const Profile& profile, nn::Module& model, const PlanChoice& c,
                      const std::vector<Tensor>& example, const CalibrationOptions& o, int times) {
  CalibrationOptions sized = o;
  sized.target = repeated({o.target}, times).front();
  const auto [measured, timeline] =
      fastest_step(measured_run(profile, model, c, repeated(example, times), sized));
  PlanRequest request;
  request.world = 2;
  request.batch = profile.microbatch_size * times * o.n_microbatches;
  return fit_calibration(profile, request, c, timeline, measured);
}

}  // namespace

CalibrationFit fit_calibration(const Profile& profile, const PlanRequest& request,
                               const PlanChoice& choice,
                               const schedules::SimulationResult& timeline, double measured_step) {
  if (timeline.timeline.empty())
    throw std::invalid_argument("fit_calibration: the measured timeline has no actions");
  Profile p = profile;
  p.compute_factor = 1;  // at every size: the fit is for the run's microbatch alone
  p.larger_compute_factors.clear();
  p.action_overhead = 0;
  PlanChoice c = choice;
  if (c.recompute.empty()) c.recompute.assign(c.num_stages(), false);
  detail::check_choice(p, c);
  const schedules::CostModel costs = detail::cost_model(p, detail::make_context(p, request), c);
  CalibrationFit fit;
  fit.measured_step = measured_step;
  for (const schedules::TimelineEvent& e : timeline.timeline) {
    if (e.action.stage < 0 || e.action.stage >= c.num_stages())
      throw std::invalid_argument("fit_calibration: the timeline's " + to_string(e.action) +
                                  " is not an action of " + c.describe());
    fit.predicted_compute += costs.duration(e.action);
    fit.measured_compute += e.end - e.start;
  }
  fit.predicted_step = pipeline_step(p, request, c);
  fit.overhead_only = overhead_matching(p, request, c, measured_step);
  if (fit.predicted_compute > 0 && fit.measured_compute > 0)
    fit.compute_factor =
        factor_within(p, request, c, fit.measured_compute / fit.predicted_compute, measured_step);
  p.compute_factor = fit.compute_factor;
  fit.action_overhead = overhead_matching(p, request, c, measured_step);
  p.action_overhead = fit.action_overhead;
  fit.calibrated_step = pipeline_step(p, request, c);
  return fit;
}

CalibrationFit calibrate_profile(Profile& profile, nn::Module& model,
                                 const std::vector<Tensor>& example_microbatch,
                                 const CalibrationOptions& o) {
  if (!o.loss_fn || !o.target.defined())
    throw std::invalid_argument("calibrate_profile: needs the loss function and a target");
  if (profile.segments.size() < 2)
    throw std::invalid_argument("calibrate_profile: needs a profile of at least 2 segments");
  const PlanChoice c = calibration_choice(profile, o.n_microbatches);
  CalibrationFit fit = fit_at(profile, model, c, example_microbatch, o, 1);
  if (o.larger_sizes)
    for (const int64_t samples : larger_sizes(profile)) {
      const int times = static_cast<int>(samples / profile.microbatch_size);
      const CalibrationFit larger = fit_at(profile, model, c, example_microbatch, o, times);
      fit.larger_compute_factors.push_back({samples, larger.compute_factor});
      fit.larger_measured_steps.push_back(larger.measured_step);
    }
  profile.compute_factor = fit.compute_factor;
  profile.larger_compute_factors = fit.larger_compute_factors;
  profile.action_overhead = fit.action_overhead;
  return fit;
}

}  // namespace tensorplay::pipelining
