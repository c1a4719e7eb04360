// tp-launch's rank processes alone: a rank dies with its launcher (killed with SIGKILL between
// starting it and reaping it), a program that cannot start is an error naming it and the reason,
// and ranks may be started only from the launcher's main thread.
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rank_process.h"

namespace {

using tensorplay::launch::start_rank;

const std::vector<std::string> kEnvironment = {"PATH=/usr/local/bin:/usr/bin:/bin"};

// Makes this process the reaper of its orphaned descendants while it lives, so a rank whose
// launcher died is reparented here and can be reaped (and killed, if the check fails).
struct SubreaperScope {
  SubreaperScope() { REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0); }
  ~SubreaperScope() { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
};

// Waits at most `limit` for `pid` (a child of this process) to end; returns its wait status, or
// -1 when it still runs.
int wait_at_most(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

}  // namespace

TEST_CASE("rank process: a rank dies with a launcher killed with SIGKILL", "[tp_launch]") {
  // The rank ran on, in its own process group, until its program ended by itself.
  SubreaperScope subreaper;
  int ends[2];
  REQUIRE(::pipe(ends) == 0);
  const pid_t launcher = ::fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    // A launcher of its own: starts one rank, says its pid, and is killed before reaping it.
    pid_t rank_pid = -1;
    try {
      rank_pid = start_rank(0, {"sleep", "30"}, kEnvironment).pid;
    } catch (...) {
    }
    [[maybe_unused]] ssize_t written = ::write(ends[1], &rank_pid, sizeof(rank_pid));
    ::kill(::getpid(), SIGKILL);
  }
  ::close(ends[1]);
  pid_t rank_pid = -1;
  pollfd readable{ends[0], POLLIN, 0};
  if (::poll(&readable, 1, 10000) == 1) {
    [[maybe_unused]] ssize_t count = ::read(ends[0], &rank_pid, sizeof(rank_pid));
  }
  ::close(ends[0]);
  CHECK(wait_at_most(launcher, std::chrono::seconds(10)) != -1);
  REQUIRE(rank_pid > 0);
  const int status = wait_at_most(rank_pid, std::chrono::seconds(5));
  if (status == -1) {
    ::kill(rank_pid, SIGKILL);
    ::waitpid(rank_pid, nullptr, 0);
    FAIL("the rank still ran 5 s after its launcher was killed");
  }
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}

TEST_CASE("rank process: a program that cannot start is an error naming it and why",
          "[tp_launch]") {
  try {
    start_rank(3, {"/nonexistent/trainer", "--steps", "1"}, kEnvironment);
    FAIL("a missing program started");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) ==
          "cannot start '/nonexistent/trainer' for rank 3: No such file or directory");
  }
}

TEST_CASE("rank process: ranks start only from the launcher's main thread", "[tp_launch]") {
  // The parent-death signal follows the thread that forked: a rank started from a thread that
  // ends would be killed with it.
  std::string error;
  std::thread([&] {
    try {
      start_rank(0, {"true"}, kEnvironment);
    } catch (const std::logic_error& e) {
      error = e.what();
    }
  }).join();
  CHECK(error == "start_rank must run on the launcher's main thread");
}
