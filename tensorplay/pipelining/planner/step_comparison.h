// Predicted against measured: a plan's simulated step set beside a step read from a message log,
// per rank (step, busy time, bytes held) and per action kind, each with its relative error.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tensorplay/pipelining/planner/plan_file.h"
#include "tensorplay/pipelining/planner/profile.h"
#include "tensorplay/schedules/action.h"
#include "tensorplay/schedules/simulator.h"

namespace tensorplay::pipelining {

/// One figure, predicted and measured (seconds or bytes).
struct ComparedFigure {
  double predicted = 0;
  double measured = 0;
  /// (predicted - measured) / measured: 0 when both are 0, infinity when only measured is.
  double error() const;
};

/// One rank's figures. A rank's step is the time from the step's first action (any rank's) to
/// the end of its own last one.
struct RankComparison {
  int rank = 0;
  ComparedFigure step_seconds;
  ComparedFigure busy_seconds;
  /// Predicted: the most activation bytes held at once (the memory model); measured: the most
  /// the log's memory lines show after an action (activations and gradients charged to the
  /// rank's stages). Only when the log has memory lines and the profile has bytes.
  bool has_bytes = false;
  ComparedFigure peak_bytes;
};

/// The mean duration of one kind of action over every rank.
struct KindComparison {
  schedules::ActionKind kind = schedules::ActionKind::Forward;
  size_t actions = 0;  ///< of this kind in the step (the same in both)
  ComparedFigure mean_seconds;
};

/// A whole step, predicted against measured.
struct StepComparison {
  ComparedFigure step_seconds;  ///< the makespans
  ComparedFigure bubble;        ///< idle share of ranks x makespan
  std::vector<RankComparison> ranks;
  std::vector<KindComparison> kinds;  ///< in ActionKind order, kinds the step ran
};

/// The simulator's step for `plan` on `profile` (simulate_choice): the plan's schedule, cut (its
/// split names looked up among the profile's segments), microbatches, recomputation and threads,
/// every rank on one host. Transfers take the channel plan_channel() picks: between ranks in
/// processes of their own (`separate_processes`, a tp-launch run) the UCX one, else the in-process
/// one. Times in seconds, the pipeline only. Throws std::invalid_argument naming a split the
/// profile lacks.
schedules::SimulationResult predict_plan_step(const Profile& profile, const Plan& plan,
                                              bool separate_processes = false);

/// Sets `measured` (times in units of `measured_seconds_per_unit`: 1e-6 for a message log's
/// microseconds) beside `predicted` (seconds). `measured_peak_bytes`: per rank, empty when the
/// log has no memory lines. Throws std::invalid_argument naming the difference when the two
/// steps have other ranks or other actions (another schedule or microbatch count: pass the plan
/// the run used).
StepComparison compare_step(const schedules::SimulationResult& predicted,
                            const schedules::SimulationResult& measured,
                            double measured_seconds_per_unit,
                            const std::vector<double>& measured_peak_bytes = {});

/// "predicted against measured" lines: the step, each rank and each action kind, times in
/// microseconds, errors in percent.
std::string format_step_comparison(const StepComparison& comparison);

}  // namespace tensorplay::pipelining
