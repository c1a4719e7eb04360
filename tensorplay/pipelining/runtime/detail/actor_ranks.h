// The rank runtime over CAF stage actors: what the embedded and the multi-process runtimes share
// (dispatch a step to this process's actors, gather their reports, ask the status actors, abort,
// stop). Each variant builds its actors and says how to reach the other ranks.
#pragma once

#include <caf/all.hpp>
#include <memory>
#include <string>
#include <vector>

#include "tensorplay/pipelining/runtime/detail/rank_runtime.h"
#include "tensorplay/pipelining/runtime/detail/schedule_spec.h"
#include "tensorplay/pipelining/runtime/detail/stage_actor.h"
#include "tensorplay/wire/protocol.h"

namespace tensorplay::pipelining::detail {

class ActorRanks : public RankRuntime {
 public:
  /// Over `system`, where its actors run.
  ActorRanks(const ScheduleSpec& spec, caf::actor_system& system) : spec_(spec), system_(system) {}
  /// Stops the actors without waiting (stop() waits, bounded).
  ~ActorRanks() override;

  int local_ranks() const override { return static_cast<int>(local_actors_.size()); }
  void dispatch(std::shared_ptr<StepData> data) override;
  std::optional<RankReport> next_report(uint64_t step, Deadline deadline) override;
  std::string collect_status(uint64_t step, Deadline deadline) override;
  std::vector<std::string> abort(uint64_t step, Deadline deadline) override;
  std::string still_in(uint64_t step) const override;
  std::vector<std::string> stop(std::chrono::milliseconds wait) override;

 protected:
  /// Ends the posted receives of the schedule's transfers after an abort.
  virtual void cancel_transfers() = 0;
  /// Called once the actors are told to stop (unregister what routes messages to them).
  virtual void detach() {}

  const ScheduleSpec& spec_;
  caf::actor_system& system_;
  std::vector<StageActorHandle> actors_;          ///< by rank (proxies of other processes' actors)
  std::vector<StatusActorHandle> status_actors_;  ///< by rank: answer status requests at once
  std::vector<StageActorHandle> local_actors_;    ///< this process's stage actors
  std::vector<std::shared_ptr<StageWorker>> local_workers_;

 private:
  /// The driver's side of the current step (made by dispatch on the caller's thread).
  std::unique_ptr<caf::scoped_actor> self_;
  /// Done reports still to hand out from the last done message (which stands for several ranks),
  /// and the rank that sent it.
  int done_reports_ = 0;
  int done_rank_ = 0;
  bool stopped_ = false;
};

/// The embedded runtime: every rank's stage actor in this process, over an in-process channel.
std::unique_ptr<RankRuntime> make_embedded_ranks(const ScheduleSpec& spec);

/// The multi-process runtime: this process's rank of the group its stages were built for. Meets
/// the other ranks (construction agreement; `local_error`, when not empty, is this rank's reason
/// to fail, which every rank then reports), chooses the channel, exchanges the actors.
std::unique_ptr<RankRuntime> make_process_ranks(const ScheduleSpec& spec,
                                                const std::vector<int>& group_ranks,
                                                const RemoteError& local_error);

}  // namespace tensorplay::pipelining::detail
