// Validator for compute-only orders: every F exactly once per stage and microbatch, I/B after F,
// W after I, sharding actions in place, each stage on one rank, and no cross-rank deadlock.
#pragma once

#include <vector>

#include "tensorplay/schedules/action.h"
#include "tensorplay/schedules/format.h"

namespace tensorplay::schedules {

/// Checks `order` for `num_stages` stages and `n_microbatches` microbatches and returns the
/// stage -> rank mapping it implies. When `placement` is given (stage -> rank), every stage must
/// run on its rank. Sharding actions are optional, at most one of each kind per stage: UNSHARD
/// before the stage's first F, REDUCE_GRAD after its last B or W, RESHARD after both.
/// Throws ScheduleError with PyTorch's step-by-rank table, failing step marked.
std::vector<int> validate_order(const PipelineOrder& order, int num_stages, int n_microbatches,
                                const std::vector<int>* placement = nullptr);

/// Runs the order in lock-step (one action per rank per step; an action runs once the actions
/// it depends on ran in earlier steps) and returns the table with bubbles. Throws ScheduleError
/// naming the stuck actions when no rank can move (a cross-rank deadlock).
SteppedOrder step_order(const PipelineOrder& order, int num_stages, int n_microbatches);

/// The number of stages an order uses: one more than its largest stage index.
int count_stages(const PipelineOrder& order);
/// The number of microbatches an order uses: one more than its largest microbatch index.
int count_microbatches(const PipelineOrder& order);

}  // namespace tensorplay::schedules
