// Test support: the ranks of one job joined in this process (join_job), one thread each, on a
// loopback port, with what each rank's work returned or threw.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/process_group.h"

namespace tensorplay::testing {

/// A loopback port free a moment ago (the kernel's choice).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), length);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

/// The launcher environment of `rank` of a job of `world_size` ranks meeting at 127.0.0.1:port.
inline distributed::LaunchEnv loopback_env(int rank, int world_size, int port) {
  distributed::LaunchEnv env;
  env.launched = true;
  env.source = "torchrun";
  env.rank = rank;
  env.world_size = world_size;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  return env;
}

/// What one rank did: its world group when it joined, and the error it threw, if any.
struct RankOutcome {
  std::optional<distributed::ProcessGroup> group;
  std::string error;  ///< empty: joined and did its work
};

/// Joins `ranks` of a job of `world_size` ranks, each on a thread of its own with an actor system
/// of its own, then runs `work` on each rank's world group. Groups are kept until every thread
/// is done (so no rank leaves while another still needs it), then returned.
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
