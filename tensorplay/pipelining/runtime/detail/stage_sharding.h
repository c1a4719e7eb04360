// Sharded stages under the schedules (private to pipelining/runtime/): which stages hold modules
// fully_shard was applied to, the checks on them, and what UNSHARD, REDUCE_GRAD and RESHARD do.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/schedules/action.h"

namespace tensorplay::pipelining::detail {

/// The stage indices among `stages` whose module tree holds a module fully_shard was applied
/// to, ascending.
std::vector<int> sharded_stage_indices(const std::vector<PipelineStage*>& stages);

/// Checks the sharded stages of a schedule named `schedule`: each sharded module's group is
/// the stage mesh's "dp" group, and every parameter of the stage is sharded (a replicated one
/// beside them would be averaged by no one). Throws std::invalid_argument naming the stage, the
/// module or parameter, and what to do.
void check_sharded_stages(const std::vector<PipelineStage*>& stages, const std::string& schedule);

/// Runs UNSHARD (every sharded module of the stage gathered, and kept gathered without gradient
/// sync until RESHARD: the microbatches' gradients add up unsharded), REDUCE_GRAD (their
/// reduce-scatter, once) or RESHARD (back to shards, the modules' own settings restored) on
/// `stage`.
void run_sharding_action(PipelineStage& stage, schedules::ActionKind kind);

/// After a failed step: the stage's sharded modules resharded and their settings restored, if
/// an UNSHARD ran without its RESHARD (no collective).
void abandon_sharding(PipelineStage& stage);

/// The gathered-parameter bytes of `stage` in the step (its parameters' bytes while gathered, the
/// highest since reset_gathered_peaks) and the highest its rank held gathered at once (its
/// stages' together); zeros for a stage never gathered.
std::pair<int64_t, int64_t> gathered_parameter_bytes(const PipelineStage& stage);
/// Starts a step's gathered-parameter peaks for `stages` and their rank.
void reset_gathered_peaks(const std::vector<PipelineStage*>& stages);

/// `order` with the sharding actions of `sharded` stages (schedules::add_sharding_actions).
schedules::RankOrder with_sharding_actions(const schedules::RankOrder& order,
                                           const std::vector<int>& sharded);

}  // namespace tensorplay::pipelining::detail
