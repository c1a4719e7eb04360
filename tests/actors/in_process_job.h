// Test support: the ranks of one job joined in this process (join_job), one thread each, on a
// loopback port, with what each rank's work returned or threw.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tensorplay/distributed/launch_env.h"
#include "tensorplay/distributed/process_group.h"

namespace tensorplay::testing {

/// A loopback port free a moment ago; the environment of `rank` of a job meeting on it.
inline int free_port() { return distributed::free_loopback_port(); }
inline distributed::LaunchEnv loopback_env(int rank, int world_size, int port) {
  return distributed::loopback_launch_env(rank, world_size, port);
}

/// What one rank did: its world group when it joined, and the error it threw, if any.
struct RankOutcome {
  std::optional<distributed::ProcessGroup> group;
  std::string error;  ///< empty: joined and did its work
};

/// What `call` threw (its what()), or "" when it returned: for a rank's thread, which makes no
/// Catch2 assertion (CHECK_THROWS_WITH included), to keep an error for the test's thread to check.
inline std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

/// Joins `ranks` of a job of `world_size` ranks, each on a thread of its own with an actor system
/// of its own, then runs `work` on each rank's world group. Groups are kept until every thread
/// is done (so no rank leaves while another still needs it), then returned. `work` runs on the
/// rank's thread, where Catch2's assertions (CHECK, REQUIRE, INFO, ...) must not be used (they
/// are not thread-safe): it records what the rank saw (or throws, which lands in the outcome's
/// `error`), and the test's thread asserts on that once run_ranks returns.
inline std::vector<RankOutcome> run_ranks(
    int world_size, const std::vector<int>& ranks, std::chrono::milliseconds timeout,
    const std::function<void(distributed::ProcessGroup&)>& work = {}) {
  const int port = free_port();
  std::vector<RankOutcome> out(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        out[i].group = distributed::join_job({.backend = "ucx",
                                              .timeout = timeout,
                                              .env = loopback_env(ranks[i], world_size, port)});
        if (work) work(*out[i].group);
      } catch (const std::exception& e) {
        out[i].error = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace tensorplay::testing
