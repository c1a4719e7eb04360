// A file descriptor that closes itself: tp-launch holds a dozen of them (pipes, log files) and
// every exit path, including errors half way through starting the ranks, must close them.
#pragma once

#include <unistd.h>

#include <utility>

namespace tensorplay::launch {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  /// The descriptor, or -1 when none is held.
  int get() const { return fd_; }
  /// Whether a descriptor is held.
  explicit operator bool() const { return fd_ >= 0; }
  /// Closes the held descriptor (if any) and takes `fd` instead.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace tensorplay::launch
