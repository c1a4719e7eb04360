// Two processes for one benchmark: a fork, a socket between them for addresses and figures, and a
// bounded wait for the child. Shared by the UCX benchmarks (no UCX or tensorplay code here).
#pragma once

#include <poll.h>
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

/// Runs `body(rank, fd)` as rank 0 in this process and as rank 1 in a forked child, `fd` being
/// each side's end of one socket. Fork before starting any thread. Returns 0 when both bodies
/// returned 0; the child is always reaped, and killed when it outlives `limit`.
inline int run_two_processes(const std::function<int(int rank, int fd)>& body,
                             std::chrono::seconds limit = std::chrono::seconds(120)) {
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
    std::_Exit(run(1, fds[1]));
  }
  close(fds[1]);
  int result = run(0, fds[0]);
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
