// calibrate_profile (calibrate.h): one real 1F1B run, then a bisection on the per-action time.
#include "planner/calibrate.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "actors/schedule.h"
#include "planner/plan.h"
#include "stages/build_stage.h"
#include "stages/pipeline.h"
#include "tensors/tensors.h"

namespace tensorplay::pipelining {
namespace {

// The calibration's configuration: 1F1B on two ranks, cut balanced on the profile.
PlanChoice calibration_choice(const Profile& profile, int microbatches) {
  std::vector<double> costs;
  for (const SegmentProfile& s : profile.segments) costs.push_back(s.forward + s.full_backward);
  PlanChoice c;
  c.schedule = schedules::ScheduleKind::OneFOneB;
  c.ranks = 2;
  c.microbatches = microbatches;
  c.stage_begin = balanced_stage_begins(costs, 2);
  c.recompute = {false, false};
  c.cut = "balanced";
  return c;
}

std::vector<Tensor> repeated(const std::vector<Tensor>& tensors, int times) {
  std::vector<Tensor> out;
  for (const Tensor& t : tensors) out.push_back(cat(std::vector<Tensor>(times, t), 0));
  return out;
}

double measured_step(const Profile& profile, nn::Module& model, const PlanChoice& c,
                     const std::vector<Tensor>& example, const CalibrationOptions& o) {
  PipelineOptions cut;
  cut.split_spec[profile.segments.at(c.stage_begin[1]).name] = SplitPoint::Beginning;
  Pipe pipe = pipeline(model, example, cut);
  auto stages = build_stages(pipe, {cpu()});
  for (auto& stage : stages) stage->set_num_threads(1);  // as the profile measured
  PipelineSchedule schedule(stages, c.microbatches, o.loss_fn, c.schedule);
  optim::SGD zero(parameters(stages), {.lr = 0.0f});
  const std::vector<Tensor> inputs = repeated(example, c.microbatches);
  const Tensor target = repeated({o.target}, c.microbatches).front();
  double best = 1e30;
  for (int i = 0; i <= std::max(1, o.steps); ++i) {
    const auto start = std::chrono::steady_clock::now();
    schedule.step(inputs, {.target = target});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i > 0) best = std::min(best, seconds);  // the first step warms up
    zero.zero_grad();
  }
  return best;
}

}  // namespace

double calibrate_profile(Profile& profile, nn::Module& model,
                         const std::vector<Tensor>& example_microbatch,
                         const CalibrationOptions& o) {
  if (!o.loss_fn || !o.target.defined())
    throw std::invalid_argument("calibrate_profile: needs the loss function and a target");
  if (profile.segments.size() < 2)
    throw std::invalid_argument("calibrate_profile: needs a profile of at least 2 segments");
  const PlanChoice c = calibration_choice(profile, o.microbatches);
  const double measured = measured_step(profile, model, c, example_microbatch, o);
  const PlanRequest request{.world = 2, .batch = profile.microbatch_size * o.microbatches};
  // The pipeline's step alone: the measured one has no optimizer step.
  auto pipeline_step = [&] {
    const PlanChoice p = predict(profile, request, c);
    return p.step_seconds - p.optimizer_seconds;
  };
  profile.action_overhead = 0;
  if (pipeline_step() >= measured) return measured;
  double low = 0, high = measured;  // the simulator's step grows with the overhead
  for (int i = 0; i < 40; ++i) {
    profile.action_overhead = (low + high) / 2;
    (pipeline_step() < measured ? low : high) = profile.action_overhead;
  }
  profile.action_overhead = low;
  return measured;
}

}  // namespace tensorplay::pipelining
