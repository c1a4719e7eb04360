// Watches the running ranks until every one has exited: relays their output, forwards the
// launcher's signals, and when one rank fails (or the launcher is told to stop) stops the others,
// SIGTERM first and SIGKILL after a grace period. One poll loop does all of it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "line_relay.h"
#include "rank_process.h"
#include "unique_fd.h"

namespace tensorplay::launch {

/// How the job ended, for the launcher to report and exit with.
struct Outcome {
  int exit_code = 0;
  std::string message;              ///< empty when every rank succeeded
  bool launcher_signalled = false;  ///< the launcher itself was told to stop (no restart)
};

class Supervisor {
 public:
  /// `grace_seconds`: how long stopped ranks get between SIGTERM and SIGKILL.
  explicit Supervisor(double grace_seconds);

  /// Takes a started rank; `log_file` may be empty (no --log-dir).
  void add_rank(RankProcess process, UniqueFd log_file);

  /// Stops the ranks added so far because the launch itself failed (`message`, `exit_code`).
  void abort_launch(const std::string& message, int exit_code);

  /// Also watches `fd` (an elastic rendezvous connection): when it is readable, `on_readable`
  /// runs; a message it returns stops every rank (SIGTERM, then SIGKILL after the grace period)
  /// with that message and `exit_code` as the outcome. Returning nullopt goes on. `fd` is watched
  /// until unwatch() (which `on_readable` calls when the connection is closed).
  void watch(int fd, std::function<std::optional<std::string>()> on_readable, int exit_code);
  /// Stops watching the fd given to watch().
  void unwatch() { watched_fd_ = -1; }

  /// Runs until every rank has exited and its output is relayed, then reaps them; call once, after
  /// the last add_rank.
  Outcome run();

 private:
  using Clock = std::chrono::steady_clock;

  struct Rank {
    RankProcess process;
    UniqueFd log_file;
    std::unique_ptr<RankLog> log;  ///< on the heap: the relays point to it while ranks_ grows
    LineRelay stdout_relay;
    LineRelay stderr_relay;
  };

  // -- the loop's steps ---------------------------------------------------------------------------
  int poll_timeout_ms(bool all_exited) const;
  void handle_signals();
  void note_exited_ranks();
  void relay_output(int fd);
  void kill_if_grace_expired();

  // -- stopping -----------------------------------------------------------------------------------
  void stop_ranks(int first_signal);
  void signal_running_ranks(int signal_number);
  bool any_running() const;

  double grace_seconds_;
  std::vector<Rank> ranks_;
  bool stopping_ = false;
  bool killed_ = false;  ///< SIGKILL sent: nothing left to escalate to
  Clock::time_point kill_deadline_{};
  int launcher_signal_ = 0;  ///< the signal that made the launcher stop the ranks, if any
  Outcome outcome_;          ///< set by the first reason to stop; later ones keep it
  int watched_fd_ = -1;
  std::function<std::optional<std::string>()> on_watched_;
  int watched_exit_code_ = 0;
};

}  // namespace tensorplay::launch
