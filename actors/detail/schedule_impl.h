// The state behind PipelineSchedule (private to actors/): the stages, the order, the stage actors
// and, across processes, the group and the transport; shared by the driver's source files.
#pragma once

#include <atomic>
#include <caf/all.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/detail/agreement.h"
#include "actors/detail/grad_reducer.h"
#include "actors/process_group.h"
#include "actors/schedule.h"
#include "actors/stage_worker.h"
#include "transport/channel.h"

namespace tensorplay::pipelining {

namespace detail {

/// Opens a rank's contribution to the construction meeting when it cannot build its share.
inline constexpr const char* kLocalError = "error: ";

/// The forward-only part of a rank's order (for eval).
schedules::RankOrder forward_only(const schedules::RankOrder& order);

}  // namespace detail

struct PipelineSchedule::Impl {
  std::vector<std::shared_ptr<PipelineStage>> stages;
  int n_microbatches = 0;
  LossFn loss_fn;
  schedules::ScheduleKind kind;
  ScheduleOptions options;
  int num_stages = 0;
  int ranks = 0;
  int stages_per_rank = 1;
  schedules::PipelineOrder order;
  std::vector<int> stage_to_rank;
  std::shared_ptr<transport::Channel> channel;
  std::vector<caf::actor>
      actors;  ///< by rank (proxies of other processes' actors when distributed)
  std::vector<caf::actor> local_actors;   ///< the actors of this process
  std::vector<caf::actor> status_actors;  ///< by rank: answer status requests, never busy
  std::vector<std::shared_ptr<StageWorker>> local_workers;
  /// One step at a time: a second caller fails at once instead of queueing behind the first.
  std::atomic<bool> stepping{false};
  /// The last step that failed, and which local ranks had not dropped it when the caller got
  /// its error (stuck in compute): a later step waits for none of them, it fails at once.
  uint64_t last_failed_step = 0;
  std::vector<PipelineStage*> claimed;  ///< stages this schedule owns (released at the end)

  ~Impl() {
    for (PipelineStage* s : claimed) s->release(this);
  }
  uint64_t next_step = 1;
  // Across processes: the group (global ranks, by schedule rank) and this process's rank in it.
  bool distributed = false;
  std::vector<int> group_ranks;
  int my_rank = 0;
  std::map<std::string, distributed::ProcessGroup> tie_groups;  // ties spanning processes
  CustomFunction overlap_fb;         ///< register_custom_function(OverlapFB, ...)
  uint32_t stream = 0;               ///< this schedule's traffic on a shared channel
  bool messages_registered = false;  ///< the channel routes `stream`'s messages to us
  // Data parallelism over the stages' mesh "dp" dimension (null reducer: none).
  std::vector<int> dp_ranks;   ///< global ranks of the dp group
  uint32_t dp_stream = 0;      ///< the reducer's traffic on the UCX channel
  bool sync_gradients = true;  ///< false under no_sync
  /// Destroyed before the stages it hooks.
  std::unique_ptr<detail::GradReducer> reducer;
  /// Routes the replicas' failure notices to the reducer; destroyed before it (unregisters).
  std::shared_ptr<void> dp_failure_hook;

  /// The policy rank `rank` trains with: the options' factory, or the order.
  std::unique_ptr<schedules::SchedulePolicy> training_policy(int rank) const {
    return schedules::make_policy(
        options.policy, schedules::policy_context(rank, order, stage_to_rank, n_microbatches));
  }
  /// Whether the stages are all of the pipeline, or this process's share of a process group's.
  void find_group();
  void check_stages();
  /// The checks of this process's share: stages, placement, order, parameters.
  void check_local();
  void setup_embedded();
  /// Meets the other ranks; `local_error` (when not empty) is this rank's reason to fail, which
  /// every rank then reports.
  void setup_distributed(const std::string& local_error);
  /// The construction meeting: every rank's facts (this rank's, or `local_error`), checked
  /// alike on every rank (check_agreement); returns them by schedule rank.
  std::vector<detail::RankFacts> meet(const std::string& local_error, bool wants_nccl);
  /// Sets `channel` (NCCL when `all_nccl`, else the cluster's UCX) and each stage's peer on it;
  /// returns this process's peer number.
  int choose_channel(bool all_nccl, std::vector<int>& stage_to_peer);
  /// Exchanges the stage and status actors of every rank and tells `mine` its peers.
  void exchange_actors(const caf::actor& mine, const caf::actor& my_status);
  /// The construction meeting's checks on every rank's facts (the same on every rank): a rank's
  /// own error, the counts, the placement, then what was built (detail::check_built_alike).
  void check_agreement(const std::vector<detail::RankFacts>& facts,
                       const detail::AgreementContext& context);
  void check_same_counts(const std::vector<detail::RankFacts>& facts) const;
  void check_placement(const std::vector<detail::RankFacts>& facts) const;
  /// What this rank tells the others at the construction meeting.
  detail::RankFacts facts_of_this_rank(bool wants_nccl) const;
  /// Every rank's detail::RankDetail bytes, by schedule rank (a collective over the group).
  std::vector<std::string> gather_detail(const std::string& name) const;
  /// The digest of the Pipe every local stage was built from (null: built by hand, or unequal).
  const PipeDigest* pipe_digest() const;
  /// Builds the gradient reducer when the stages' mesh has a "dp" dimension of more than one.
  void setup_data_parallel();
  /// Drops step `step`'s averaging after a failure (`why`): tells the other replicas, so their
  /// all-reduces fail at once instead of waiting for this one, cancels the reducer's transfers
  /// and waits (bounded) for the all-reduce running.
  void abandon_data_parallel(uint64_t step, const std::string& why);
  /// Local copies of each tied parameter, by name (what the reducer averages after the sums).
  std::map<std::string, std::vector<Tensor>> tied_copies() const;
  std::string describe_rank(int rank) const;
  /// Tells the other ranks this process's step `step` failed before it started.
  void fail_step_everywhere(uint64_t step, const std::string& what);
  StepOutput run_step(const std::vector<Tensor>& inputs, const nn::TensorDict& kwargs,
                      const StepOptions& step_options, bool training);
  /// Tells this process's ranks to drop step `step`, waits for them until `deadline`, and
  /// returns what each rank that did not answer in time is still doing.
  std::vector<std::string> abort_all(uint64_t step, std::chrono::steady_clock::time_point deadline);
  /// Asks every rank what it does in `step` (what it waits for, or that it has not started it),
  /// all at once, and returns the answers by the deadline.
  std::string collect_status(caf::scoped_actor& self, uint64_t step,
                             std::chrono::steady_clock::time_point deadline);
  /// Throws when a rank of this process is still computing an earlier failed step.
  void check_not_stuck(const std::string& name);
  /// The keep-alive handle for the stage actors: the stages they compute on.
  std::shared_ptr<const void> stages_handle() const {
    return std::make_shared<std::vector<std::shared_ptr<PipelineStage>>>(stages);
  }
};

}  // namespace tensorplay::pipelining
