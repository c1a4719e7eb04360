// What a simulated (or measured) training step did: its makespan, bubbles, per-rank figures, the
// timeline of its actions and the memory each rank held. Read by the memory model and timelines.
#pragma once

#include <string>
#include <vector>

#include "tensorplay/schedules/action.h"

namespace tensorplay::schedules {

/// One compute action as it ran.
struct TimelineEvent {
  int rank = 0;
  Action action;
  double start = 0.0;
  double end = 0.0;
  /// A recomputing stage's F that kept its activations for the backward right after it in the
  /// rank's order (is_backward_of), or that backward, which rebuilt nothing.
  bool kept_activations = false;
};

/// The bytes a rank holds from `time` on (a point of a memory track).
struct MemorySample {
  int rank = 0;
  double time = 0.0;
  double bytes = 0.0;
};

/// Figures of one simulated training step. All ranks start at 0.
struct SimulationResult {
  double makespan = 0.0;     ///< when the last rank ends (the step ends for all ranks together)
  double span = 0.0;         ///< longest rank's first-action-start to last-action-end
  std::vector<double> busy;  ///< per rank: compute time
  std::vector<double> idle;  ///< per rank: makespan - busy
  std::vector<double> first_start;      ///< per rank
  std::vector<double> last_end;         ///< per rank
  std::vector<int> peak_activations;    ///< per rank: most activations held at once (F to W/B)
  double bubble_fraction = 0.0;         ///< sum of idle / (ranks * makespan)
  std::size_t actions = 0;              ///< compute actions run
  std::vector<TimelineEvent> timeline;  ///< in start order, when recorded

  /// Per rank, from CostModel::memory (empty when it is empty or no timeline was recorded):
  /// the most activation bytes held at once, and that plus the rank's fixed bytes
  /// (memory_model.h).
  std::vector<double> peak_activation_bytes;
  std::vector<double> peak_bytes;
  /// What each rank holds over the step (activation bytes; predicted by the memory model, or
  /// measured by tp-trace from the message log), each rank's samples in time order.
  std::vector<MemorySample> memory_track;

  /// idle[rank] / makespan.
  double rank_bubble_fraction(int rank) const;
};

/// "  rank R: busy B, idle I, peak activations P" lines for the first 64 ranks (then a count of the
/// rest), each time followed by `unit` ("" for cost-model units, " us" for microseconds), and
/// ", peak bytes 9.38 MiB" when the memory model ran.
std::string format_rank_figures(const SimulationResult& result, const std::string& unit = "");

/// A byte count for people: "410 B", "1.50 KiB", "9.38 MiB", "1.20 GiB" (powers of 1024).
std::string format_bytes(double bytes);

}  // namespace tensorplay::schedules
