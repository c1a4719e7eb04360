// The multi-process rank runtime: this process's rank of a schedule's group. It meets the other
// ranks when built (every rank's facts checked alike), chooses the channel, and exchanges actors.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tensorplay/pipelining/pipe_digest.h"
#include "tensorplay/pipelining/runtime/detail/actor_ranks.h"
#include "tensorplay/pipelining/runtime/detail/agreement.h"
#include "tensorplay/transport/channel.h"

namespace tensorplay::distributed::detail {
class GroupRuntime;
}

namespace tensorplay::pipelining::detail {

class ProcessRanks : public ActorRanks {
 public:
  /// This process's rank of the group of global `group_ranks` (by schedule rank) in the job of
  /// `runtime` (kept alive with its actor system while the schedule lives).
  ProcessRanks(std::shared_ptr<distributed::detail::GroupRuntime> runtime, const ScheduleSpec& spec,
               std::vector<int> group_ranks, const RemoteError& local_error);

  ~ProcessRanks() override;

  bool distributed() const override { return true; }
  int rank() const override { return my_rank_; }
  std::string describe_rank(int rank) const override;
  uint32_t stream() const override { return stream_; }
  void fail_step_everywhere(uint64_t step, const std::string& what) override;

 protected:
  void cancel_transfers() override { channel_->cancel_stream(stream_); }
  void detach() override;

 private:
  /// The construction meeting: every rank's facts (this rank's, or `local_error`), checked alike
  /// on every rank (check_agreement); returns them by schedule rank.
  std::vector<RankFacts> meet(const RemoteError& local_error, bool wants_nccl);
  /// What this rank tells the others at the construction meeting.
  RankFacts facts_of_this_rank(bool wants_nccl) const;
  /// Every rank's RankDetail bytes, by schedule rank (a collective over the group).
  std::vector<std::string> gather_detail(const std::string& name) const;
  /// The digest of the Pipe every local stage was built from (null: built by hand, or unequal).
  const PipeDigest* pipe_digest() const;
  /// The meeting's checks (the same on every rank): a rank's own error, the counts, the
  /// placement, then what was built (check_built_alike).
  void check_agreement(const std::vector<RankFacts>& facts, const AgreementContext& context);
  void check_same_counts(const std::vector<RankFacts>& facts) const;
  void check_placement(const std::vector<RankFacts>& facts) const;
  /// Sets `channel_` (NCCL when `all_nccl`, else the group's UCX) and each stage's peer on it;
  /// returns this process's peer number.
  int choose_channel(bool all_nccl, std::vector<int>& stage_to_peer);
  /// Spawns this rank's stage and status actors and routes the channel's notifications to them.
  void spawn_actors(std::vector<int> stage_to_peer, int self_peer);
  /// Exchanges the stage and status actors of every rank and tells this rank's actor its peers.
  void exchange_actors();

  std::shared_ptr<distributed::detail::GroupRuntime> runtime_;
  std::vector<int> group_ranks_;
  int my_rank_ = 0;
  std::shared_ptr<transport::Channel> channel_;
  uint32_t stream_ = 0;
  bool messages_registered_ = false;  ///< the channel routes `stream_`'s messages to us
  StatusActorHandle my_status_;       ///< this rank's status actor (exchanged with the stage actor)
};

}  // namespace tensorplay::pipelining::detail
