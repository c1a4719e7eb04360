// Building each rank's schedule policy in one place, so the stage actors and the simulator
// (tp-sim) run the same policies: a fixed order (generated, or loaded from a CSV), the dynamic
// policy, or a policy of the user's own.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "tensorplay/schedules/action.h"
#include "tensorplay/schedules/policy.h"

namespace tensorplay::schedules {

/// What a factory knows about the rank it builds a policy for.
struct PolicyContext {
  int rank = 0;
  std::vector<int> local_stages;  ///< the stages this rank hosts, ascending
  int num_stages = 0;             ///< stages in the whole pipeline
  int n_microbatches = 0;       ///< microbatches per step
  /// The rank's compute actions in the schedule's order (the generated or loaded one).
  const RankOrder* order = nullptr;
};

/// Builds one rank's policy; called once per rank (and per schedule) when it is set up.
using PolicyFactory = std::function<std::unique_ptr<SchedulePolicy>(const PolicyContext&)>;

/// Follows the rank's order (PolicyContext::order) strictly: the default.
PolicyFactory static_order_policies();
/// The dynamic policy (make_dynamic_policy) on every rank: any ready action, backward first,
/// new microbatches only while `options.max_stashed_activations` leaves room.
PolicyFactory dynamic_policies(DynamicPolicyOptions options);

/// One policy per rank: `factory` (static_order_policies when null) given each rank's stages
/// from `stage_to_rank` and its row of `order` (which may be empty for factories that need no
/// order). Throws std::invalid_argument when the factory returns null or the order has fewer rows
/// than ranks for a factory that reads it.
std::vector<std::unique_ptr<SchedulePolicy>> make_policies(const PolicyFactory& factory,
                                                           const PipelineOrder& order,
                                                           const std::vector<int>& stage_to_rank,
                                                           int n_microbatches);

/// The context of `rank` (its stages from `stage_to_rank`, its row of `order` when there is one).
PolicyContext policy_context(int rank, const PipelineOrder& order,
                             const std::vector<int>& stage_to_rank, int n_microbatches);

/// Builds `rank`'s policy with `factory` (static_order_policies when null); throws
/// std::invalid_argument when the factory returns null or needs an order that is missing.
std::unique_ptr<SchedulePolicy> make_policy(const PolicyFactory& factory,
                                            const PolicyContext& context);

}  // namespace tensorplay::schedules
