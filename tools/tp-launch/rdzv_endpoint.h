// The elastic rendezvous over TCP: the endpoint (one launcher serves a RoundKeeper on
// --rdzv-endpoint) and each node's client, speaking rdzv_round.h's lines.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "rdzv_round.h"
#include "unique_fd.h"

namespace tensorplay::launch {

/// Serves the rounds of one job on a listening socket, on a thread of its own. A node keeps its
/// connection for the whole job: the endpoint tells it each round's assignment (ROUND), that the
/// round ended (END: stop the ranks and join again), or why the job stops (ERROR); a closed
/// connection is a lost node (DONE first: a finished one).
class RdzvServer {
 public:
  /// Listens on host:port (port 0: any free one). Throws std::runtime_error naming the address
  /// when it cannot bind (another launcher serves it already: be its client instead).
  RdzvServer(const std::string& host, int port, RdzvConfig config);
  ~RdzvServer();
  RdzvServer(const RdzvServer&) = delete;
  RdzvServer& operator=(const RdzvServer&) = delete;

  int port() const { return port_; }

 private:
  struct State;
  void serve();

  UniqueFd listener_;
  int port_ = 0;
  std::unique_ptr<State> state_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// One node's connection to the endpoint.
class RdzvClient {
 public:
  /// Connects to host:port, retrying for up to `timeout_seconds` (the endpoint's launcher may
  /// start later). Throws std::runtime_error naming the endpoint when it cannot.
  RdzvClient(const std::string& host, int port, double timeout_seconds);

  /// Joins the next round and waits up to `timeout_seconds` for its assignment. Throws
  /// std::runtime_error with the endpoint's reason (ERROR), or on a timeout or a lost endpoint.
  RoundAssignment join(const JoinRequest& request, double timeout_seconds);
  /// Whether the endpoint has ended the running round (waits up to `wait_seconds`). Throws
  /// std::runtime_error for an ERROR or a lost endpoint.
  bool round_ended(double wait_seconds = 0);
  /// Tells the endpoint a local rank failed: the round ends for every node.
  void report_failure();
  /// Tells the endpoint this node's ranks finished: its leaving ends no round.
  void report_done();
  /// The connection, for a poll loop (readable: a line from the endpoint, or its end).
  int fd() const { return socket_.get(); }

 private:
  std::optional<std::string> read_line(double wait_seconds);
  UniqueFd socket_;
  std::string endpoint_, buffer_;
};

}  // namespace tensorplay::launch
