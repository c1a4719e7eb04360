// What train_gpt measures over a run: each rank's busy and idle time and the bubble, step after
// step, from the timelines of the message log; and the loop's times, losses and memory.
#pragma once

#include <cmath>
#include <vector>

#include "memory_summary.h"
#include "tensorplay/schedules/simulator.h"

namespace train_gpt {

/// Idle share of the step over the ranks this process saw (all of them on the embedded runtime).
double step_bubble(const tensorplay::schedules::SimulationResult& r);

/// One rank's figures, summed over the measured steps.
struct RankFigures {
  double busy_us = 0, idle_us = 0;
  int peak_activations = 0;
  bool seen = false;
};

/// Everything the pipeline did, step after step.
struct RunFigures {
  double bubble_sum = 0;
  int bubble_steps = 0;
  std::vector<RankFigures> ranks;

  /// Adds one step's timeline (ranks of other processes have no events in it).
  void add(const tensorplay::schedules::SimulationResult& r);
  double bubble() const { return bubble_steps ? bubble_sum / bubble_steps : NAN; }
};

/// What the training loop measured.
struct RunResult {
  int first_step = 1, last_step = 0;
  double wall_seconds = 0, timed_seconds = 0;
  int timed_steps = 0;  ///< steps after the first (which warms caches and threads up)
  double loss = NAN, val_loss = NAN;
  RunFigures figures;
  MemorySummary memory;  ///< each rank's measured peak bytes

  double seconds_per_step() const { return timed_steps ? timed_seconds / timed_steps : NAN; }
};

}  // namespace train_gpt
