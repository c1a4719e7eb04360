// Cost model of the simulator: per-stage F, I and W times, and the link each stage boundary
// crosses (latency, bandwidth, bytes). Times are in any unit, used consistently.
#pragma once

#include <vector>

#include "tensorplay/schedules/action.h"
#include "tensorplay/schedules/memory_costs.h"

namespace tensorplay::schedules {

/// Durations of compute actions and of transfers between ranks.
struct CostModel {
  /// Per stage (index = stage), or a single value used for every stage.
  std::vector<double> forward = {1.0};
  std::vector<double> input_backward = {1.0};   ///< I
  std::vector<double> weight_backward = {1.0};  ///< W; B costs I + W
  /// OVERLAP_F_B costs overlap_factor * (F + B): 1 = no overlap gain, 0.5 = both halves hidden.
  double overlap_factor = 1.0;
  /// Fixed time of every cross-rank transfer.
  double latency = 0.0;
  /// Bytes per time unit; 0 = infinite (transfers cost only the latency).
  double bandwidth = 0.0;
  /// Bytes crossing the boundary after stage s (index = s), or one value for every boundary; the
  /// gradient going back is the same size as the activation going forward.
  std::vector<double> boundary_bytes = {0.0};
  /// Bytes each stage holds (the memory model; all zero by default: no bytes predicted).
  MemoryCosts memory;
  /// Per stage (or one value for every stage; empty: none): the part of its I (or B) that a
  /// recomputing stage may run ahead, while its rank waits for that action's output gradient
  /// (the recomputation its backward meets first). The action then takes that much less.
  std::vector<double> recompute_ahead;

  /// Per stage (or one value for every stage; empty: none): the part of its I (or B) that is the
  /// recomputation of its forward. When a rank's order runs a
  /// stage's F right before that microbatch's backward (is_backward_of), the F keeps its
  /// activations and the backward takes this much less.
  std::vector<double> recompute;

  /// Per stage (or one value for every stage; empty: 0): the time of a sharded stage's UNSHARD
  /// (the all-gather of its parameters). RESHARD costs nothing.
  std::vector<double> all_gather;
  /// Per stage (or one value for every stage; empty: 0): the time of a sharded stage's
  /// REDUCE_GRAD (the reduce-scatter of its gradients).
  std::vector<double> reduce_scatter;

  /// recompute_ahead of `stage` (0 when none).
  double ahead(int stage) const;
  /// recompute of `stage` (0 when none).
  double recomputation(int stage) const;

  /// F, I and W the same on every stage.
  static CostModel uniform(double forward, double input_backward, double weight_backward);

  /// Duration of a compute action (F, I, W, B = I + W, OVERLAP_F_B) or a sharding action
  /// (UNSHARD, REDUCE_GRAD; RESHARD is 0). Throws
  /// std::invalid_argument naming the list when it has no value for the action's stage.
  double duration(const Action& action) const;
  /// Time for the activation (or gradient) of the boundary between `stage` and `stage + 1`.
  /// Throws std::invalid_argument when boundary_bytes has no value for `stage`.
  double transfer_time(int stage) const;
  /// Throws std::invalid_argument when a list is empty, negative, or shorter than `num_stages`
  /// without being a single broadcast value.
  void check(int num_stages) const;
};

}  // namespace tensorplay::schedules
