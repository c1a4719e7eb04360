// The supervisor's poll loop. Every wait is a poll() on the ranks' pipes and the signal pipe, with
// a timeout only while a SIGKILL deadline or the final drain is pending, so an idle job costs no
// CPU. A rank that ends is only noted, not reaped, until the end: its zombie keeps its pid, so its
// process group can still be signalled without the risk of reaching a process that reused the id.
#include "supervisor.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <optional>

#include "signal_pipe.h"

namespace tensorplay::launch {
namespace {

// After the last rank exits, output still in the pipes is read until they close, stay quiet this
// long, or the drain limit passes: a helper process a rank left behind may hold a pipe open (and
// even keep writing) for ever.
constexpr int kDrainQuietMs = 100;
constexpr std::chrono::seconds kDrainLimit{2};
constexpr std::size_t kReadChunk = 64 * 1024;

}  // namespace

Supervisor::Supervisor(double grace_seconds) : grace_seconds_(grace_seconds) {}

void Supervisor::add_rank(RankProcess process, UniqueFd log_file) {
  const int rank = process.rank;
  auto log = std::make_unique<RankLog>(RankLog{log_file.get()});
  RankLog* shared_log = log.get();
  ranks_.push_back(Rank{std::move(process), std::move(log_file), std::move(log),
                        LineRelay(rank, STDOUT_FILENO, shared_log),
                        LineRelay(rank, STDERR_FILENO, shared_log)});
}

void Supervisor::abort_launch(const std::string& message, int exit_code) {
  if (outcome_.message.empty()) outcome_ = {exit_code, message};
  stop_ranks(SIGTERM);
}

void Supervisor::watch(int fd, std::function<std::optional<std::string>()> on_readable,
                       int exit_code) {
  watched_fd_ = fd;
  on_watched_ = std::move(on_readable);
  watched_exit_code_ = exit_code;
}

Outcome Supervisor::run() {
  std::vector<pollfd> watched;
  std::optional<Clock::time_point> drain_deadline;
  while (true) {
    note_exited_ranks();  // also catches a rank that exited before the loop began
    const bool all_exited = !any_running();
    if (all_exited && !drain_deadline) drain_deadline = Clock::now() + kDrainLimit;
    if (all_exited && Clock::now() >= *drain_deadline) break;
    watched.assign(1, pollfd{signal_pipe_fd(), POLLIN, 0});
    for (const Rank& rank : ranks_) {
      for (const UniqueFd* pipe : {&rank.process.stdout_pipe, &rank.process.stderr_pipe}) {
        if (*pipe) watched.push_back(pollfd{pipe->get(), POLLIN, 0});
      }
    }
    if (all_exited && watched.size() == 1) break;
    const size_t external = watched.size();
    if (watched_fd_ >= 0 && !all_exited) watched.push_back(pollfd{watched_fd_, POLLIN, 0});

    const int ready = ::poll(watched.data(), watched.size(), poll_timeout_ms(all_exited));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0 && all_exited) break;  // pipes quiet after the last exit: done
    if (watched[0].revents & POLLIN) handle_signals();
    for (std::size_t i = 1; i < external; ++i) {
      if (watched[i].revents & (POLLIN | POLLHUP | POLLERR)) relay_output(watched[i].fd);
    }
    if (watched.size() > external && (watched[external].revents & (POLLIN | POLLHUP | POLLERR)))
      if (auto message = on_watched_(); message && !stopping_) {
        if (outcome_.message.empty()) outcome_ = {watched_exit_code_, *message};
        stop_ranks(SIGTERM);
      }
    kill_if_grace_expired();
  }
  for (Rank& rank : ranks_) {
    rank.stdout_relay.finish();
    rank.stderr_relay.finish();
  }
  // A stopped job leaves nothing behind: helpers a rank started die with it, whatever they ignore.
  if (stopping_) signal_running_ranks(SIGKILL);
  for (Rank& rank : ranks_) reap(rank.process);
  outcome_.launcher_signalled = launcher_signal_ != 0;
  return outcome_;
}

int Supervisor::poll_timeout_ms(bool all_exited) const {
  if (all_exited) return kDrainQuietMs;
  if (!stopping_ || killed_) return -1;
  const auto left = std::chrono::duration<double, std::milli>(kill_deadline_ - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::ceil(left.count()));
}

void Supervisor::handle_signals() {
  for (int signal_number : take_pending_signals()) {
    if (signal_number == SIGCHLD) continue;  // exits are noted at the top of every turn
    if (launcher_signal_ != 0) {
      // Asked twice: the user does not want to wait out the grace period.
      signal_running_ranks(SIGKILL);
      killed_ = true;
      continue;
    }
    launcher_signal_ = signal_number;
    // SIGHUP (a closed terminal or session) means "stop", as for torchrun, but a rank has no
    // terminal and may not stop for it: UCX takes SIGHUP as its debug signal (it raises its log
    // level and the rank runs on). The ranks get SIGTERM instead, the usual way to stop them.
    const int forwarded = signal_number == SIGHUP ? SIGTERM : signal_number;
    if (outcome_.message.empty()) {
      outcome_ = {128 + signal_number,
                  "tp-launch: received " + signal_name(signal_number) + "; " +
                      (forwarded == signal_number ? std::string("forwarded it")
                                                  : "sent " + signal_name(forwarded)) +
                      " to every rank and stopped them"};
    }
    stop_ranks(forwarded);
  }
}

void Supervisor::note_exited_ranks() {
  for (Rank& rank : ranks_) {
    if (rank.process.exited || !check_exited(rank.process)) continue;
    const RankEnding& ending = rank.process.ending;
    if (ending.succeeded() || stopping_) continue;
    // The first failure while the job runs normally: it decides the outcome and stops the rest.
    const bool others_running = any_running();
    outcome_ = {ending.exit_code(), "tp-launch: rank " + std::to_string(rank.process.rank) + " " +
                                        ending.describe() +
                                        (others_running ? "; stopped the other ranks" : "")};
    stop_ranks(SIGTERM);
  }
}

void Supervisor::relay_output(int fd) {
  for (Rank& rank : ranks_) {
    for (auto [pipe, relay] : {std::pair{&rank.process.stdout_pipe, &rank.stdout_relay},
                               std::pair{&rank.process.stderr_pipe, &rank.stderr_relay}}) {
      if (pipe->get() != fd) continue;
      char buffer[kReadChunk];
      const ssize_t count = ::read(fd, buffer, sizeof(buffer));
      if (count > 0) {
        relay->feed(std::string_view(buffer, static_cast<std::size_t>(count)));
      } else if (count == 0 || (errno != EINTR && errno != EAGAIN)) {
        relay->finish();  // end of stream: flush a last line without a newline
        pipe->reset();
      }
      return;
    }
  }
}

void Supervisor::kill_if_grace_expired() {
  if (stopping_ && !killed_ && Clock::now() >= kill_deadline_ && any_running()) {
    signal_running_ranks(SIGKILL);
    killed_ = true;
  }
}

void Supervisor::stop_ranks(int first_signal) {
  signal_running_ranks(first_signal);
  if (stopping_) return;
  stopping_ = true;
  kill_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(grace_seconds_));
}

void Supervisor::signal_running_ranks(int signal_number) {
  for (const Rank& rank : ranks_) signal_rank(rank.process, signal_number);
}

bool Supervisor::any_running() const {
  for (const Rank& rank : ranks_) {
    if (!rank.process.exited) return true;
  }
  return false;
}

}  // namespace tensorplay::launch
