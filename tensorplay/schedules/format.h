// Step-by-rank table of a pipeline order, as PyTorch's _format_pipeline_order prints it: one row
// per time step, one column per rank, blank cells for bubbles, the failing step marked.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tensorplay/schedules/action.h"

namespace tensorplay::schedules {

/// One rank's time steps: an action, or nullopt for an idle step (a bubble).
using SteppedRankOrder = std::vector<std::optional<Action>>;
/// Index = rank.
using SteppedOrder = std::vector<SteppedRankOrder>;

/// The table; `error_step` >= 0 appends " <-- ERROR HERE" to that step's row.
std::string format_pipeline_order(const SteppedOrder& order, int error_step = -1);
/// The same for an order without bubbles (step i = each rank's i-th action).
std::string format_pipeline_order(const PipelineOrder& order, int error_step = -1);

/// "\n  rank R waits to run A" for every rank whose next action (next[rank], an index into its
/// order) is still to run: what a stuck walk over `order` reports.
std::string describe_blocked_ranks(const PipelineOrder& order, const std::vector<int>& next);

}  // namespace tensorplay::schedules
