// What a schedule is built from, checked: the stages this process hosts, the counts, the options
// and the placement. Read-only once built; the rank runtime, the step driver and the hooks share
// it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/pipelining/runtime/stage_placement.h"
#include "tensorplay/pipelining/runtime/stage_worker.h"

namespace tensorplay::distributed::detail {
class GroupRuntime;
}

namespace tensorplay::pipelining::detail {

struct ScheduleSpec {
  std::vector<std::shared_ptr<PipelineStage>> stages;  ///< this process's, by stage index
  int n_microbatches = 0;
  LossFn loss_fn;
  schedules::ScheduleKind kind{};
  ScheduleOptions options;
  StagePlacement placement;

  /// "1F1B", for messages.
  std::string name() const { return std::string(schedules::schedule_name(kind)); }
  /// This process's stages, as plain pointers.
  std::vector<PipelineStage*> local_stages() const { return stage_pointers(stages); }
  /// The devices of this process's stages, in order.
  std::vector<Device> local_devices() const {
    std::vector<Device> out;
    for (const PipelineStage* s : local_stages()) out.push_back(s->device());
    return out;
  }
  /// Rank `rank`'s stages among this process's.
  std::vector<PipelineStage*> stages_of(int rank) const;
  /// The worker of schedule rank `rank` over `channel` (stage_worker.h: `stage_to_peer`,
  /// `self_peer`), with the training policy (the options' factory, or the order) and the
  /// forward-only order for eval.
  std::shared_ptr<StageWorker> make_worker(int rank, std::shared_ptr<transport::Channel> channel,
                                           std::vector<int> stage_to_peer = {},
                                           int self_peer = 0) const;
  /// The runtime of the job the stages were placed in (their mesh's; the process's default job
  /// for stages without one), or null when the process has joined none.
  distributed::detail::GroupRuntime* runtime() const;
  /// The number of ranks of that job (1 without one).
  int job_world_size() const;
  /// Keeps the stages alive (for stage actors that may outlive the schedule while stuck).
  std::shared_ptr<const void> stages_handle() const {
    return std::make_shared<std::vector<std::shared_ptr<PipelineStage>>>(stages);
  }
};

}  // namespace tensorplay::pipelining::detail
