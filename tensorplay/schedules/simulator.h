// The simulator: runs one policy per rank (the runtime's own policy objects) under a cost model
// and reports makespan, bubbles, peak stashed activations and the timeline.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tensorplay/schedules/action.h"
#include "tensorplay/schedules/cost_model.h"
#include "tensorplay/schedules/policy.h"
#include "tensorplay/schedules/simulation_result.h"

namespace tensorplay::schedules {

/// Simulation switches.
struct SimulationOptions {
  /// Keep every action's start and end (costs memory on very large runs).
  bool record_timeline = true;
};

/// Runs `policies` (index = rank; reset() first) over the placement `stage_to_rank` for
/// `num_microbatches`. A rank runs one compute action at a time; transfers overlap compute and
/// take CostModel::transfer_time. Throws ScheduleError naming what each stuck rank waits for
/// when the run cannot finish (deadlock). Static orders with no recomputation ahead take a sweep
/// over the orders instead of the event loop: the same result, in time linear in the actions.
SimulationResult simulate(const std::vector<SchedulePolicy*>& policies,
                          const std::vector<int>& stage_to_rank, int n_microbatches,
                          const CostModel& costs, const SimulationOptions& options = {});

/// The same with a static-order policy per rank following `order`.
SimulationResult simulate_order(const PipelineOrder& order, const std::vector<int>& stage_to_rank,
                                int n_microbatches, const CostModel& costs,
                                const SimulationOptions& options = {});

}  // namespace tensorplay::schedules
