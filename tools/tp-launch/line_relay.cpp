// Line relaying for rank output. Each line goes out in a single write() call where the pipe allows
// (lines up to PIPE_BUF are atomic on a pipe), and the launcher is single-threaded, so a line is
// always complete before the next begins.
#include "line_relay.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace tensorplay::launch {
namespace {

// A rank that prints without newlines must not grow the buffer without bound: past this many
// bytes, the pending text goes out as a line of its own.
constexpr std::size_t kMaxLineBytes = 64 * 1024;

// Writes all of `text`, waiting out a full pipe. A reader that went away (EPIPE) loses the
// output but must not stop the ranks, so errors end the write quietly.
void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written > 0) {
      text.remove_prefix(static_cast<std::size_t>(written));
    } else if (written < 0 && errno == EINTR) {
      continue;
    } else if (written < 0 && errno == EAGAIN) {
      pollfd writable{fd, POLLOUT, 0};
      ::poll(&writable, 1, -1);
    } else {
      return;
    }
  }
}

}  // namespace

LineRelay::LineRelay(int rank, int output_fd, int log_fd)
    : prefix_("[rank " + std::to_string(rank) + "] "), output_fd_(output_fd), log_fd_(log_fd) {}

void LineRelay::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    const auto newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      pending_.append(bytes);
      if (pending_.size() >= kMaxLineBytes) {
        emit(pending_);
        pending_.clear();
      }
      return;
    }
    if (pending_.empty()) {
      emit(bytes.substr(0, newline));
    } else {
      pending_.append(bytes.substr(0, newline));
      emit(pending_);
      pending_.clear();
    }
    bytes.remove_prefix(newline + 1);
  }
}

void LineRelay::finish() {
  if (pending_.empty()) return;
  emit(pending_);
  pending_.clear();
}

void LineRelay::emit(std::string_view line) {
  std::string out;
  out.reserve(prefix_.size() + line.size() + 1);
  out.append(prefix_).append(line).push_back('\n');
  write_all(output_fd_, out);
  if (log_fd_ >= 0) write_all(log_fd_, std::string_view(out).substr(prefix_.size()));
}

}  // namespace tensorplay::launch
