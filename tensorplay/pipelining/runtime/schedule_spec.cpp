// The schedule's spec: its rank workers built from the placement, the options and the order.
#include "tensorplay/pipelining/runtime/detail/schedule_spec.h"

#include <algorithm>

#include "tensorplay/distributed/detail/group_runtime.h"
#include "tensorplay/schedules/policy.h"

namespace tensorplay::pipelining::detail {

std::vector<PipelineStage*> ScheduleSpec::stages_of(int rank) const {
  std::vector<PipelineStage*> out;
  for (const auto& s : stages)
    if (placement.stage_to_rank.at(s->stage_index()) == rank) out.push_back(s.get());
  return out;
}

std::shared_ptr<StageWorker> ScheduleSpec::make_worker(int rank,
                                                       std::shared_ptr<transport::Channel> channel,
                                                       std::vector<int> stage_to_peer,
                                                       int self_peer) const {
  auto training_policy = schedules::make_policy(
      options.policy,
      schedules::policy_context(rank, placement.order, placement.stage_to_rank, n_microbatches));
  auto eval_policy = schedules::make_static_order_policy(forward_only(placement.order[rank]));
  // Under a fixed order, a stage whose every forward is followed at once by its own backward
  // gains nothing from recomputation: it runs without (a dynamic policy decides as it goes).
  std::vector<int> skip;
  if (training_policy->is_static_order())
    skip = schedules::stages_with_backward_after_each_forward(placement.order[rank]);
  for (PipelineStage* s : stages_of(rank))
    s->set_skip_recompute(std::find(skip.begin(), skip.end(), s->stage_index()) != skip.end());
  return std::make_shared<StageWorker>(rank, stages_of(rank), placement.num_stages, n_microbatches,
                                       std::move(training_policy), std::move(eval_policy),
                                       std::move(channel), options.transfer_timeout,
                                       std::move(stage_to_peer), self_peer);
}

distributed::detail::GroupRuntime* ScheduleSpec::runtime() const {
  return distributed::detail::runtime_of(stages.front()->get_mesh());
}

int ScheduleSpec::job_world_size() const {
  const distributed::detail::GroupRuntime* job = runtime();
  return job ? job->env().world_size : 1;
}

}  // namespace tensorplay::pipelining::detail
