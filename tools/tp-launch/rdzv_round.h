// The elastic rendezvous's rounds as the endpoint keeps them (members, node order, start, end),
// pure logic over an explicit clock so tests drive every case without sockets or sleeps.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tensorplay::launch {

/// What every node's launcher must agree on (torchrun's --nnodes MIN:MAX, --rdzv-id,
/// --rdzv-timeout, --max-restarts) and the cluster token.
struct RdzvConfig {
  std::string job_id;
  int min_nodes = 1, max_nodes = 1;
  double timeout_seconds = 900;
  int max_restarts = 0;  ///< rounds after the first
  std::string token;
};

/// A node's request to take part in the next round.
struct JoinRequest {
  std::string job_id;
  std::string node_id;  ///< unique per node (host and launcher pid)
  int node_rank = -1;   ///< --node-rank, or -1: any (ordered after the ranked ones, by node_id)
  int nproc = 1;        ///< ranks on the node
  std::string token;
};

/// A round as one member node sees it.
struct RoundAssignment {
  int round = 0;       ///< 0 for the first; TORCHELASTIC_RESTART_COUNT
  int world_size = 0;  ///< ranks of all members
  int nnodes = 0;
  int node_index = 0;                ///< this node's place in node order
  int rank_offset = 0;               ///< the node's first rank (its local ranks follow)
  std::vector<std::string> members;  ///< node ids in node order
  /// Where rank 0 listens: the address node 0 reached the endpoint from (set by the endpoint).
  std::string master_addr;
};

/// The rounds of one job: which nodes belong to each round, their ranks in node order, when a
/// round starts (as many nodes as answer within the timeout, at least MIN) and when it ends (a
/// failure, or a node waiting to join).
class RoundKeeper {
 public:
  /// Throws std::invalid_argument for MIN < 1, MAX < MIN, or a timeout that is not positive.
  explicit RoundKeeper(RdzvConfig config);

  /// A node asks to join the next round at time `now` (seconds). Returns an error message for a
  /// request that cannot be accepted (another job id, a wrong cluster token, a node rank another
  /// node claims, no ranks), naming what was wrong; "" when it waits for the round. A node that
  /// joins while a round runs waits for the next one, and that round is asked for (see
  /// wants_new_round).
  std::string join(const JoinRequest& request, double now);

  /// A member reports that one of its ranks failed, or a member's launcher is gone: the running
  /// round ends and the others are asked to join the next one. The node takes no part in later
  /// rounds unless it joins again.
  void fail(const std::string& node_id, double now);

  /// Advances the clock: a gathering round starts when MAX nodes wait, or when the timeout since
  /// the first of them joined has passed and at least MIN wait; with fewer than MIN at the
  /// timeout the job fails (error()).
  void poll(double now);

  /// The running round's assignment of `node_id`, if it is a member of it.
  std::optional<RoundAssignment> assignment(const std::string& node_id) const;

  /// True while a round runs and a node waits to join: the members should end the round (stop
  /// their ranks at the next checkpoint) and join again, so the next round includes it.
  bool wants_new_round() const;
  /// Ends the running round without a failure (its members rejoin).
  void end_round(double now);

  bool running() const { return running_; }
  int round() const { return round_; }
  /// Why the job cannot go on ("" while it can): too few nodes until the timeout, or no restarts
  /// left.
  const std::string& error() const { return error_; }

 private:
  void start_round();
  void next_round(double now);

  RdzvConfig config_;
  int round_ = 0;
  bool running_ = false;
  std::string error_;
  double gather_since_ = -1;  ///< when the first node of the gathering round joined
  std::map<std::string, JoinRequest> waiting_;      ///< by node id
  std::map<std::string, RoundAssignment> members_;  ///< of the running round
};

/// The wire format between a node's launcher and the endpoint, one line each:
///   JOIN <job> <node-id> <node-rank|-> <nproc> <token>
///   ROUND <round> <world> <nnodes> <node-index> <rank-offset> <master-addr>   (the answer)
///   WAIT | ERROR <message>
std::string format_join(const JoinRequest& request);
/// Parses a JOIN line; nullopt (with `error` set) when it is not one.
std::optional<JoinRequest> parse_join(const std::string& line, std::string& error);
std::string format_round(const RoundAssignment& round);
std::optional<RoundAssignment> parse_round(const std::string& line);

}  // namespace tensorplay::launch
