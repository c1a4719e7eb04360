// Lowering a compute-only order to one with communication: SEND_F/RECV_F/SEND_B/RECV_B for every
// cross-rank stage boundary, placed as PyTorch's _add_send_recv places them.
#pragma once

#include <vector>

#include "tensorplay/schedules/action.h"

namespace tensorplay::schedules {

/// Adds a SEND right after each F (and I/B) whose neighbour stage lives on another rank, and the
/// matching RECV on that rank at the same point of the walk, so both sides issue transfers in one
/// consistent order. `stage_to_rank` maps every stage to its rank. Throws ScheduleError when the
/// compute order cannot be lowered (a dependency is never satisfied).
PipelineOrder lower_to_communication(const PipelineOrder& compute_order,
                                     const std::vector<int>& stage_to_rank);

/// Drops SEND/RECV actions, giving back the compute-only order (sharding actions stay).
PipelineOrder strip_communication(const PipelineOrder& order);

}  // namespace tensorplay::schedules
