// The simulator's memory prediction: replays a simulated step's timeline against the memory
// costs and gives each rank's peak bytes (fixed bytes plus the most activations held at once).
#pragma once

#include <vector>

#include "tensorplay/schedules/memory_costs.h"
#include "tensorplay/schedules/simulation_result.h"

namespace tensorplay::schedules {

/// Each rank's predicted bytes over one step.
struct MemoryPrediction {
  std::vector<double> peak_activation_bytes;  ///< per rank: most activation bytes held at once
  std::vector<double> fixed_bytes;            ///< per rank: its stages' fixed bytes
  std::vector<double> peak_bytes;             ///< per rank: fixed + peak activation bytes
  /// Activation bytes per rank at each action's start (with what it holds while running) and
  /// end.
  std::vector<MemorySample> track;
};

/// Replays `result.timeline` (simulate with record_timeline) rank by rank: an F takes what it
/// keeps (and its retained bytes, held to the step's end, and its sent bytes, held until the next
/// stage's F starts) when it starts; B frees it when it ends; I frees it and takes the weight
/// stash, W frees that; each action holds its own transient bytes while it runs (F's, I's, W's
/// and B's, B's by default the larger of I's and W's; and, on a recomputing stage, B and I the
/// rebuilt activations, unless the F kept them for its backward right after it). Throws
/// std::invalid_argument when the timeline is empty but actions ran, the costs do not cover the
/// stages, or a stage's rank, an event's rank or an event's stage is not one of `result`'s ranks
/// or `stage_to_rank`'s stages (all checked before any is used).
MemoryPrediction predict_memory(const SimulationResult& result,
                                const std::vector<int>& stage_to_rank, const MemoryCosts& costs);

}  // namespace tensorplay::schedules
