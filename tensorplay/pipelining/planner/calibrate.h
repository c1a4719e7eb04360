// Calibrating a profile against the runtime: real runs tell how much slower compute runs when the
// ranks of a host compute at once (at each microbatch size), and what the runtime adds per action.
#pragma once

#include <vector>

#include "tensorplay/core/tensor.h"
#include "tensorplay/nn/module.h"
#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/pipelining/planner/plan.h"
#include "tensorplay/pipelining/planner/profile.h"
#include "tensorplay/schedules/simulator.h"

namespace tensorplay::pipelining {

/// What calibrate_profile runs.
struct CalibrationOptions {
  LossFn loss_fn;
  Tensor target;         ///< one microbatch's target
  int n_microbatches = 4;  ///< of the profile's size each
  /// Timed steps (the fastest counts), after one warm-up step. The fastest of a dozen is a
  /// steadier estimate of an undisturbed step on a shared host than of a few: bench_plan's
  /// predictions at one microbatch size moved together by 5-7% with 5.
  int steps = 12;
  /// Also run at each larger microbatch the profile's segments were measured at (a whole
  /// multiple of its microbatch: copies of the example), one run each, for the compute factor
  /// at that size (Profile::larger_compute_factors).
  bool larger_sizes = true;
};

/// What a calibration found: the two figures it sets in the profile, and what they rest on.
struct CalibrationFit {
  /// The measured actions' time over the profile's for them (measured_compute over
  /// predicted_compute), less if compute so scaled would make the simulator's step slower than
  /// the measured one (then the overhead is 0 and the step matches).
  double compute_factor = 1;
  double action_overhead = 0;  ///< seconds the runtime adds to each action
  double measured_step = 0;    ///< seconds: the measured pipeline step
  double predicted_step = 0;   ///< seconds: the simulator's, uncalibrated (factor 1, overhead 0)
  /// Seconds: the simulator's with the fitted figures (measured_step, but for a step the
  /// simulator cannot match, e.g. one faster than the profile's compute alone).
  double calibrated_step = 0;
  double measured_compute = 0;   ///< seconds: the measured actions' durations, summed
  double predicted_compute = 0;  ///< seconds: the profile's time of the same actions, summed
  /// For comparison, the earlier model: the time per action that alone (compute factor 1) makes
  /// the simulator's step equal the measured one. It charges slow compute to every action, so a
  /// schedule of more, smaller actions (F, I, W) is over-predicted.
  double overhead_only = 0;
  /// The compute factor fitted at each larger microbatch calibrate_profile ran (the action
  /// overhead stays the profile microbatch's), and each of those runs' measured step.
  std::vector<SizedFactor> larger_compute_factors;
  std::vector<double> larger_measured_steps;
};

/// Fits the runtime's two costs to a measured step of `choice` under `request` (its schedule,
/// ranks, microbatches and cut): `timeline` holds the step's compute actions as they ran (start
/// to finish, seconds; step_timeline of the message log) and `measured_step` its wall time. The
/// compute factor is the actions' measured durations summed over the profile's time for them
/// (lowered until the simulated step is not above `measured_step`: on a loaded host a rank
/// computes faster while the other idles than the average over the step says); then, compute so
/// scaled, the action overhead is the time per action that makes the simulator's pipeline step
/// equal `measured_step` (0 when it already does). Compute that
/// ran slower than profiled goes to the factor, time between actions (messages, scheduling) to
/// the overhead; a schedule of more, smaller actions pays the second more often, not the first.
/// Throws std::invalid_argument when the timeline has no actions or an action of another shape.
CalibrationFit fit_calibration(const Profile& profile, const PlanRequest& request,
                               const PlanChoice& choice,
                               const schedules::SimulationResult& timeline, double measured_step);

/// Runs `model` on the embedded runtime, two ranks under 1F1B (cut balanced on the profile,
/// `options.microbatches` copies of `example_microbatch` per step) with its message log captured,
/// and sets profile.compute_factor and profile.action_overhead by fit_calibration on the fastest
/// timed step (its wall time and its actions; the pipeline only, no optimizer step; the log's
/// own cost, microseconds per action, counts as the runtime's); then, with
/// `options.larger_sizes`, profile.larger_compute_factors by one such run and fit at each larger
/// size. Returns the fit. The model's gradients are left zero; its parameters do not change.
CalibrationFit calibrate_profile(Profile& profile, nn::Module& model,
                                 const std::vector<Tensor>& example_microbatch,
                                 const CalibrationOptions& options);

}  // namespace tensorplay::pipelining
