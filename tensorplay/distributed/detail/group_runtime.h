// A rank's runtime in a job (private to distributed/): its place in the job, every rank's process
// actor, the collectives' inbox, the transports made at init, and the actor system they run on.
#pragma once

#include <atomic>
#include <caf/all.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tensorplay/distributed/device_mesh.h"
#include "tensorplay/distributed/init_options.h"
#include "tensorplay/distributed/launch_env.h"
#include "tensorplay/transport/ucx_channel.h"
#include "tensorplay/wire/detail/caf_messages.h"

namespace tensorplay::distributed::detail {

using pipelining::detail::Contribution;
using pipelining::detail::PeerEntry;

/// Contributions to collectives, filled by the process actor, read by the callers.
class CollectiveInbox {
 public:
  void put(Contribution c);
  /// A peer's process is gone: waits that need it fail at once.
  void peer_down(int rank, const std::string& why);
  /// A gone peer's transfers are to end now: calls the hook (outside the inbox's lock).
  void transport_down(int rank, const std::string& why);
  /// The hook transport_down calls.
  void on_peer_down(std::function<void(int, const std::string&)> hook);
  /// What a data-parallel peer's failed step is told to: step, the peer's rank, why.
  using StreamFailure = std::function<void(uint64_t step, int rank, const std::string& why)>;
  /// Routes peers' failure notices for `stream` to `hook` (null: drops them from now on; when
  /// this returns, no call of the old hook is still running).
  void on_stream_failure(uint32_t stream, StreamFailure hook);
  /// A peer says its step `step` on `stream` failed: calls the stream's hook, if any.
  void stream_failed(uint32_t stream, uint64_t step, int rank, const std::string& why);
  /// The process on `node` holds the cluster token (it said hello with it, or rank 0 vouched for
  /// it in the table): its messages are accepted.
  void admit(const caf::node_id& node);
  bool admitted(const caf::node_id& node);
  /// A contribution from a node not admitted yet: kept (returns true) while this process has not
  /// learnt the job's members, since a member may send before this process has read the table.
  bool hold(const caf::node_id& node, Contribution& c);
  /// The members are known: contributions held from them are put, the others returned (to be
  /// reported); from now on nothing is held.
  std::vector<caf::node_id> release_held();
  /// The contributions under `key` from every rank in `from`, by rank; waits until `deadline`.
  /// Throws DistributedError naming the missing ranks (and why, when one is known gone).
  std::map<int, Contribution> take(uint64_t key, const std::vector<int>& from,
                                   std::chrono::steady_clock::time_point deadline,
                                   const std::string& what);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<uint64_t, std::map<int, Contribution>> got_;
  std::map<int, std::string> down_;
  std::set<caf::node_id> members_;
  bool members_known_ = false;
  std::function<void(int, const std::string&)> on_down_;
  std::vector<std::pair<caf::node_id, Contribution>> held_;
  std::mutex failure_mutex_;  // held while a hook runs, so removing one waits for it
  std::map<uint32_t, StreamFailure> failure_hooks_;
};

/// True when a message from `sender` may be trusted: it comes from this process, or from a
/// process admitted to the job. Messages without a sender are not.
bool from_member(const caf::strong_actor_ptr& sender, const caf::node_id& here,
                 CollectiveInbox& members);

/// Logs (stderr and the message log) that this process dropped `what` from `node`, with the
/// node's network address when the middleman knows it; at most a few lines per node.
void report_intruder(caf::actor_system& system, int rank, const caf::node_id& node,
                     const std::string& what);

struct RdzvDeadline;
class GroupRuntime;
void connect_to_job(GroupRuntime& c, const RdzvDeadline& deadline);

/// What the rendezvous learns of the job (rendezvous_join.cpp fills it; read-only afterwards).
struct JobTable {
  std::vector<PeerEntry> peers;  ///< by global rank (process actors, hosts, UCX addresses)
  caf::actor self_actor;         ///< this process's actor (published)
  uint16_t port = 0;             ///< where self_actor is published
  int64_t clock_offset_us = 0;   ///< add to this process's steady clock to read rank 0's
};

/// One rank's runtime in a job: its place (launcher environment), every rank's process actor and
/// transport address, the collectives' inbox, the UCX channel, and the CAF actor system they run
/// on. The process's default group (init_process_group) holds one on the process's actor system;
/// a group joined with join_job holds one of its own, with an actor system of its own, so several
/// ranks of a job can live in one process. Every ProcessGroup made from it holds it.
class GroupRuntime {
 public:
  /// Joins the job as `options` say (the rendezvous, rendezvous_join.cpp), on the process's actor
  /// system (`own_system` false) or on a new one of its own. Throws DistributedError naming the
  /// rendezvous state that failed and who was waited for.
  static std::shared_ptr<GroupRuntime> join(const InitOptions& options, bool own_system);
  /// Leaves the job (close()), then stops its own actor system, if any.
  ~GroupRuntime();
  GroupRuntime(const GroupRuntime&) = delete;
  GroupRuntime& operator=(const GroupRuntime&) = delete;

  /// The actor system its actors run on.
  caf::actor_system& system() const { return *system_; }
  /// Leaves the job: unpublishes and stops this rank's process actor and closes the channel.
  /// Collectives on it fail afterwards, saying so. Idempotent.
  void close();
  bool closed() const { return closed_; }
  /// Throws DistributedError when closed: `what` was called on a group whose job was left.
  void check_open(const std::string& what) const;

  /// This rank's place in the job (the launcher's environment, or what init was given).
  const LaunchEnv& env() const { return env_; }
  /// "ucx" or "nccl": what carries device tensors between the ranks.
  const std::string& backend() const { return backend_; }
  /// How long a collective waits for the other members.
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// Add to this process's steady clock to read rank 0's.
  int64_t clock_offset_us() const { return table_.clock_offset_us; }
  /// Every rank's process actor, host and UCX address, by global rank.
  const std::vector<PeerEntry>& peers() const { return table_.peers; }
  /// This process's actor (published), and where.
  const caf::actor& self_actor() const { return table_.self_actor; }
  uint16_t port() const { return table_.port; }
  /// The contributions to collectives that the process actor receives.
  const std::shared_ptr<CollectiveInbox>& inbox() const { return inbox_; }
  /// Host-memory transport between the ranks (null in a group of one).
  const std::shared_ptr<transport::UcxChannel>& ucx() const { return ucx_; }
  /// Connection attempts still running on threads of their own (the rendezvous leaves one behind
  /// when its deadline passes first): an own actor system is not stopped under them.
  const std::shared_ptr<std::atomic<int>>& dials_in_flight() const { return dials_in_flight_; }

  /// Every member's contribution to one collective on the group of global `ranks` (this process
  /// among them), by group rank. `what` names the collective in errors.
  std::vector<Contribution> exchange(const std::vector<int>& ranks, std::string bytes,
                                     std::vector<caf::actor> actors, const std::string& what);
  /// The same, waiting until `deadline` instead of the group's timeout.
  std::vector<Contribution> exchange(const std::vector<int>& ranks, std::string bytes,
                                     std::vector<caf::actor> actors, const std::string& what,
                                     std::chrono::steady_clock::time_point deadline);
  /// "rank R (host H)" for messages.
  std::string describe(int rank) const;
  /// Tells the process actors of `ranks` (this rank skipped) that this rank's step `step` on
  /// `stream` failed, and why. Never waits.
  void notify_stream_failure(const std::vector<int>& ranks, uint32_t stream, uint64_t step,
                             const std::string& why);
  /// The id of the group of global `ranks` (this process among them): agreed by its members at
  /// its first use (a collective: every member calls it at the same point of the group's
  /// collectives) as the smallest id none of them uses for another group, so that no two groups
  /// of one process share an id, and so neither their collectives' keys nor their schedules'.
  /// 1 to kMaxGroupIds; throws DistributedError when a member has used them all.
  uint32_t group_id(const std::vector<int>& ranks);
  /// The most groups one process takes part in (ids fit the bits a pipeline key keeps).
  static constexpr uint32_t kMaxGroupIds = 255;
  /// A stream id for the next schedule built over the group of global `ranks`: the group's id
  /// above transport::kStreamBits, and in those bits a slot 1 to 15 counting the group's
  /// schedules (the same on every member: construction is collective). The 16th schedule of a
  /// group takes the 1st's slot again.
  uint32_t next_stream(const std::vector<int>& ranks);
  /// The stream keying the ring collectives (all_reduce) on the group of global `ranks`: the
  /// group's id above transport::kStreamBits, slot 0 (collective keys keep the id's bits:
  /// tensorplay/transport/collective_key.h).
  uint32_t collective_stream(const std::vector<int>& ranks);
  /// Numbers the ring collectives on the group of global `ranks`: 1, 2, ... alike on every
  /// member, a count of its own (exchange() counts the group's barriers and gathers).
  uint64_t next_collective_call(const std::vector<int>& ranks);

 private:
  GroupRuntime() = default;

  std::unique_ptr<caf::actor_system_config> own_config_;  // with own_system_ (declared first:
  std::unique_ptr<caf::actor_system> own_system_;         // destroyed last)
  caf::actor_system* system_ = nullptr;
  bool closed_ = false;
  // Set by join() (and the rendezvous it runs), then read-only.
  friend void connect_to_job(GroupRuntime& c, const RdzvDeadline& deadline);
  LaunchEnv env_;
  std::string backend_ = "ucx";
  std::chrono::milliseconds timeout_{0};
  JobTable table_;
  std::shared_ptr<CollectiveInbox> inbox_ = std::make_shared<CollectiveInbox>();
  std::shared_ptr<transport::UcxChannel> ucx_;
  std::shared_ptr<std::atomic<int>> dials_in_flight_ = std::make_shared<std::atomic<int>>(0);
  std::mutex seq_mutex_;
  std::map<uint64_t, uint32_t> seq_;      // calls made per group
  std::map<uint64_t, uint32_t> streams_;  // schedules built per group
  std::map<uint64_t, uint64_t> calls_;    // ring collectives made per group
  std::mutex id_mutex_;  // held through an id's agreement: one at a time in this process
  std::map<std::vector<int>, uint32_t> group_ids_;  // agreed ids, by group
};

/// The runtime of the process's default group (init_process_group), or null before it and after
/// destroy_process_group.
GroupRuntime* default_runtime();
/// The same, shared (what the default group's ProcessGroups hold).
std::shared_ptr<GroupRuntime> default_runtime_shared();
/// Makes `runtime` the default (null: none).
void set_default_runtime(std::shared_ptr<GroupRuntime> runtime);

/// The runtime of the job `mesh`'s ranks belong to: the mesh's job, else the default one (null
/// when the process has none).
GroupRuntime* runtime_of(const DeviceMesh& mesh);
/// The same, shared.
std::shared_ptr<GroupRuntime> shared_runtime_of(const DeviceMesh& mesh);
/// What a mesh of `runtime`'s job records as its job: null for the default runtime.
std::shared_ptr<const void> job_of(const std::shared_ptr<GroupRuntime>& runtime);

/// "[0, 1, 3]".
std::string join_ranks(const std::vector<int>& ranks);

/// A group's id from its global ranks: the same on every member, every bit mixed.
uint64_t group_hash(const std::vector<int>& ranks);

}  // namespace tensorplay::distributed::detail
