// The schedule's spec: its rank workers built from the placement, the options and the order.
#include "tensorplay/pipelining/runtime/detail/schedule_spec.h"

#include <algorithm>

#include "tensorplay/distributed/detail/group_runtime.h"
#include "tensorplay/pipelining/runtime/detail/stage_sharding.h"
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
  // Stages sharded with fully_shard: UNSHARD, REDUCE_GRAD and RESHARD in this rank's order.
  const std::vector<int> sharded = sharded_stage_indices(stages_of(rank));
  schedules::PipelineOrder order = placement.order;
  order.at(rank) = with_sharding_actions(order.at(rank), sharded);
  auto training_policy = schedules::make_policy(
      options.policy,
      schedules::policy_context(rank, order, placement.stage_to_rank, n_microbatches));
  if (!sharded.empty() && !training_policy->is_static_order())
    throw std::invalid_argument(name() + ": stage " + std::to_string(sharded.front()) +
                                " is sharded with fully_shard, which runs under the schedule's "
                                "order only; drop ScheduleOptions::policy");
  // Eval gathers a sharded stage's parameters around its forwards and reduces nothing.
  schedules::RankOrder eval_order =
      with_sharding_actions(forward_only(placement.order[rank]), sharded);
  std::erase_if(eval_order, [](const schedules::Action& a) {
    return a.kind == schedules::ActionKind::ReduceGrad;
  });
  auto eval_policy = schedules::make_static_order_policy(std::move(eval_order));
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
