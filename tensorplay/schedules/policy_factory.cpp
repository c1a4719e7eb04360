// One factory of schedule policies for the runtime and the simulator.
#include "tensorplay/schedules/policy_factory.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tensorplay::schedules {

PolicyFactory static_order_policies() {
  return [](const PolicyContext& context) {
    if (!context.order)
      throw std::invalid_argument("the static-order policy of rank " +
                                  std::to_string(context.rank) +
                                  " needs the rank's order, and none was given");
    return make_static_order_policy(*context.order);
  };
}

PolicyFactory dynamic_policies(DynamicPolicyOptions options) {
  return [options](const PolicyContext& context) {
    return make_dynamic_policy(context.local_stages, context.num_stages, context.n_microbatches,
                               options);
  };
}

PolicyContext policy_context(int rank, const PipelineOrder& order,
                             const std::vector<int>& stage_to_rank, int n_microbatches) {
  PolicyContext context;
  context.rank = rank;
  context.num_stages = static_cast<int>(stage_to_rank.size());
  context.n_microbatches = n_microbatches;
  for (int s = 0; s < context.num_stages; ++s)
    if (stage_to_rank[s] == rank) context.local_stages.push_back(s);
  if (rank >= 0 && rank < static_cast<int>(order.size())) context.order = &order[rank];
  return context;
}

std::unique_ptr<SchedulePolicy> make_policy(const PolicyFactory& factory,
                                            const PolicyContext& context) {
  std::unique_ptr<SchedulePolicy> policy =
      factory ? factory(context) : static_order_policies()(context);
  if (!policy)
    throw std::invalid_argument("the policy factory returned no policy for rank " +
                                std::to_string(context.rank));
  return policy;
}

std::vector<std::unique_ptr<SchedulePolicy>> make_policies(const PolicyFactory& factory,
                                                           const PipelineOrder& order,
                                                           const std::vector<int>& stage_to_rank,
                                                           int n_microbatches) {
  int ranks = 0;
  for (int r : stage_to_rank) ranks = std::max(ranks, r + 1);
  std::vector<std::unique_ptr<SchedulePolicy>> out;
  for (int rank = 0; rank < ranks; ++rank)
    out.push_back(
        make_policy(factory, policy_context(rank, order, stage_to_rank, n_microbatches)));
  return out;
}

}  // namespace tensorplay::schedules
