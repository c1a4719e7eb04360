// Rank 0's record of the rendezvous (private to distributed/): who joined, who was refused and why,
// and when it ends. Bookkeeping only: the process actor delivers the answers it decides.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "tensorplay/distributed/detail/group_runtime.h"
#include "tensorplay/wire/detail/caf_messages.h"

namespace tensorplay::distributed::detail {

using pipelining::detail::PeerEntry;

/// What rank 0 does with one hello.
struct HelloOutcome {
  enum class Kind {
    kWait,      ///< joined: answer with the table once every rank has
    kComplete,  ///< joined, the last one: answer every waiting rank (and this one) with the table
    kRefuse,    ///< answer this sender with `to_sender`; the rendezvous goes on (or is over)
    kEnd,       ///< answer this sender with `to_sender` and every waiting rank with `to_waiting`
  };
  Kind kind = Kind::kWait;
  std::string to_sender;
  std::string to_waiting;
};

/// Constant-time comparison, so a wrong token's timing says nothing about the right one.
bool same_token(const std::string& a, const std::string& b);

/// Rank 0's side of the rendezvous. A hello of another job (its launcher's job id differs) is
/// refused alone, naming both jobs, and the rendezvous goes on. While it is open, a refused hello
/// (another protocol, a wrong cluster token, another job, a world size that disagrees, a rank out
/// of range or taken) ends it for every rank at once (the refused one is told why, the waiting ones
/// that it was refused and why), and so does the first joined rank whose wait runs out; every
/// ending names the ranks that did not join.
class RendezvousBook {
 public:
  /// `job`: rank 0's launcher job id (LaunchEnv::job_id); a hello of another job is refused.
  RendezvousBook(int world_size, std::string token, std::string job = {});

  /// Records the hello of `entry`; `actor_on_sender_node` says its process actor lives on the
  /// node that sent it.
  HelloOutcome hello(PeerEntry entry, bool actor_on_sender_node);
  /// Rank `rank`'s wait (its hello's `wait_ms`) ran out: why the rendezvous ends now, or "" when
  /// it is over already or `rank` has not joined.
  std::string expire(int rank);
  /// Every rank's entry, by rank, once complete.
  const std::vector<PeerEntry>& table() const { return joined_; }
  /// Neither complete nor ended.
  bool open() const { return !complete_ && ended_.empty(); }
  /// "rank(s) [2] of 4 did not join (joined: [0, 1, 3])".
  std::string summary() const;

 private:
  std::string check(const PeerEntry& entry, bool actor_on_sender_node) const;

  int world_size_;
  std::string token_;
  std::string job_;
  std::vector<PeerEntry> joined_;
  std::string ended_;  // why the rendezvous ended; empty while it is not over
  bool complete_ = false;
};

/// The rendezvous's one deadline, shared by its phases.
struct RdzvDeadline {
  std::chrono::milliseconds timeout;
  std::chrono::steady_clock::time_point at;

  /// Time left (at least 1 ms, so a request still goes out and fails).
  std::chrono::milliseconds left() const {
    auto rest = std::chrono::duration_cast<std::chrono::milliseconds>(
        at - std::chrono::steady_clock::now());
    return std::max(rest, std::chrono::milliseconds(1));
  }
  bool passed() const { return std::chrono::steady_clock::now() >= at; }
  /// "rank 1's rendezvous timeout of 2000 ms (TENSORPLAY_RDZV_TIMEOUT, ...)" for messages.
  std::string of_rank(int rank) const {
    return "rank " + std::to_string(rank) + "'s rendezvous timeout of " +
           std::to_string(timeout.count()) +
           " ms (TENSORPLAY_RDZV_TIMEOUT, tp-launch --rdzv-timeout, or init_process_group's "
           ".timeout)";
  }
};

/// The rendezvous's states, in the order every rank goes through them. Each waits at most until
/// the rendezvous's one deadline, and fails with a DistributedError that names who it waited
/// for and ends "(rendezvous state: NAME)".
enum class RdzvState {
  kPublish,    ///< listen: rank 0 on MASTER_PORT (the rendezvous), the others on any port
  kHello,      ///< reach rank 0 and get every rank's entry (rank 0: wait for every hello)
  kConnect,    ///< dial the ranks below; watch every peer
  kClock,      ///< measure the clock offset to rank 0
  kTransport,  ///< connect the UCX channel to every peer
  kBarrier,    ///< meet every rank, all connected
};

/// Every state, in order.
inline constexpr RdzvState kRdzvStates[] = {RdzvState::kPublish,   RdzvState::kHello,
                                            RdzvState::kConnect,   RdzvState::kClock,
                                            RdzvState::kTransport, RdzvState::kBarrier};

/// "publish", "hello", "connect", "clock", "transport", "barrier".
const char* to_string(RdzvState state);

/// Called as a rank enters each state, on the joining thread (tests stall a state with it).
using RdzvStateHook = std::function<void(int rank, RdzvState state)>;
/// Sets the hook for every later rendezvous of this process (null: none).
void set_rdzv_state_hook(RdzvStateHook hook);

/// Meets the job as `c.env` says (rank 0 is the rendezvous), going through every RdzvState
/// before `deadline`. Throws DistributedError naming the state and who was waited for.
void connect_to_job(GroupRuntime& c, const RdzvDeadline& deadline);

/// This host's name.
std::string host_name();

}  // namespace tensorplay::distributed::detail
