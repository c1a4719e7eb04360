// Two processes for one benchmark: a fork, a socket between them for addresses and figures, and a
// bounded wait for the child. Shared by the UCX benchmarks (no UCX or tensorplay code here).
#pragma once

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace bench {

/// Writes all of `data` to `fd`; throws on error.
inline void write_all(int fd, const void* data, size_t size) {
  auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n <= 0) throw std::runtime_error("writing to the other process failed");
    p += n;
    size -= static_cast<size_t>(n);
  }
}

/// Reads exactly `size` bytes from `fd`, waiting at most `timeout_ms` for each part; throws on
/// error, end of file or timeout.
inline void read_all(int fd, void* data, size_t size, int timeout_ms = 30000) {
  auto* p = static_cast<uint8_t*>(data);
  while (size > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0)
      throw std::runtime_error("the other process did not answer within " +
                               std::to_string(timeout_ms) + " ms");
    ssize_t n = read(fd, p, size);
    if (n <= 0) throw std::runtime_error("the other process closed its socket");
    p += n;
    size -= static_cast<size_t>(n);
  }
}

/// A length-prefixed byte string (a UCX worker address).
inline void write_blob(int fd, const std::vector<uint8_t>& bytes) {
  uint64_t size = bytes.size();
  write_all(fd, &size, sizeof size);
  write_all(fd, bytes.data(), bytes.size());
}

inline std::vector<uint8_t> read_blob(int fd) {
  uint64_t size = 0;
  read_all(fd, &size, sizeof size);
  if (size > (1u << 20)) throw std::runtime_error("implausible address length from the peer");
  std::vector<uint8_t> bytes(size);
  read_all(fd, bytes.data(), size);
  return bytes;
}

/// Pins this process (and the threads it starts afterwards) to the `rank`-th core it may run on,
/// when it may run on two or more; otherwise leaves it alone. Two processes of a round trip on
/// one core take turns at the scheduler's pace instead of polling at once.
inline void pin_to_own_core(int rank) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) return;
  int seen = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed) || seen++ != rank % CPU_COUNT(&allowed)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof one, &one);
    return;
  }
}

/// Runs `body(rank, fd)` as rank 0 in this process and as rank 1 in a forked child, `fd` being
/// each side's end of one socket. Fork before starting any thread. `pin`: each rank runs on a core
/// of its own (pin_to_own_core; this process's own affinity is restored afterwards). Returns 0 when
/// both bodies returned 0; the child is always reaped, and killed when it outlives `limit`.
inline int run_two_processes(const std::function<int(int rank, int fd)>& body,
                             std::chrono::seconds limit = std::chrono::seconds(120),
                             bool pin = false) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) throw std::runtime_error("socketpair failed");
  std::fflush(stdout);
  pid_t child = fork();
  if (child < 0) throw std::runtime_error("fork failed");
  auto run = [&](int rank, int fd) {
    try {
      return body(rank, fd);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      return 1;
    }
  };
  if (child == 0) {
    close(fds[0]);
    if (pin) pin_to_own_core(1);
    std::_Exit(run(1, fds[1]));
  }
  close(fds[1]);
  cpu_set_t own;
  const bool restore = pin && sched_getaffinity(0, sizeof own, &own) == 0;
  if (pin) pin_to_own_core(0);
  int result = run(0, fds[0]);
  if (restore) sched_setaffinity(0, sizeof own, &own);
  close(fds[0]);  // a child still waiting on the socket sees end of file
  int status = 0;
  for (auto end = std::chrono::steady_clock::now() + limit;;) {
    if (waitpid(child, &status, WNOHANG) == child) break;
    if (std::chrono::steady_clock::now() >= end) {
      std::fprintf(stderr, "the child process did not exit in time; killing it\n");
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool child_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return result != 0 ? result : (child_ok ? 0 : 1);
}

}  // namespace bench
