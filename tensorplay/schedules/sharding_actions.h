// Sharding actions in a compute-only order: UNSHARD, REDUCE_GRAD and RESHARD placed for the stages
// whose parameters are sharded over their data-parallel group (PyTorch's schedule IR for FSDP).
#pragma once

#include <vector>

#include "tensorplay/schedules/action.h"

namespace tensorplay::schedules {

/// `compute_order` with each sharded stage's UNSHARD right before its first compute action,
/// and its REDUCE_GRAD then RESHARD right after its last weight gradient (B or W, an
/// OVERLAP_F_B's backward included), on the rank that runs the stage: the parameters are gathered
/// once per step and the gradients reduce-scattered once. `sharded_stages` lists the stages
/// (empty: every stage). Sharding actions already in the order are dropped first, so applying it
/// twice gives the same order. Throws std::invalid_argument for a negative stage in the list.
PipelineOrder add_sharding_actions(const PipelineOrder& compute_order,
                                   const std::vector<int>& sharded_stages = {});

/// `order` without its UNSHARD, RESHARD and REDUCE_GRAD actions.
PipelineOrder strip_sharding(const PipelineOrder& order);

}  // namespace tensorplay::schedules
