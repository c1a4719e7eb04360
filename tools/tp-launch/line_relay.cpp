// Line relaying for rank output. Each line goes out in a single write() call where the pipe allows
// (lines up to PIPE_BUF are atomic on a pipe), and the launcher is single-threaded, so a line is
// always complete before the next begins.
#include "line_relay.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace tensorplay::launch {
namespace {

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

bool is_utf8_continuation(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }

}  // namespace

LineRelay::LineRelay(int rank, int output_fd, RankLog* log)
    : prefix_("[rank " + std::to_string(rank) + "] "),
      continued_prefix_("[rank " + std::to_string(rank) + "+] "),
      output_fd_(output_fd),
      log_(log) {}

void LineRelay::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    const auto newline = bytes.find('\n');
    const std::string_view text = bytes.substr(0, newline);
    if (pending_.empty() && newline != std::string_view::npos && text.size() <= kMaxPieceBytes) {
      emit(text, true);  // the common case, a whole line in one read: no copy
    } else {
      pending_.append(text);
      emit_full_pieces();
      if (newline != std::string_view::npos) {
        emit(pending_, true);
        pending_.clear();
      }
    }
    if (newline == std::string_view::npos) return;
    bytes.remove_prefix(newline + 1);
  }
}

void LineRelay::finish() {
  if (pending_.empty()) return;
  emit(pending_, true);
  pending_.clear();
}

void LineRelay::emit_full_pieces() {
  // Only more than a piece is cut: a line of exactly kMaxPieceBytes may still end with the next
  // byte. What stays pending is never empty, so no piece of a line is empty.
  std::size_t start = 0;
  while (pending_.size() - start > kMaxPieceBytes) {
    std::size_t length = kMaxPieceBytes;
    // Back off over at most 3 continuation bytes, so a multi-byte character stays in one piece.
    while (length > kMaxPieceBytes - 3 && is_utf8_continuation(pending_[start + length])) --length;
    emit(std::string_view(pending_).substr(start, length), false);
    start += length;
  }
  pending_.erase(0, start);
}

void LineRelay::emit(std::string_view piece, bool line_ends) {
  const std::string& prefix = continuing_ ? continued_prefix_ : prefix_;
  continuing_ = !line_ends;
  std::string out;
  out.reserve(prefix.size() + piece.size() + 1);
  out.append(prefix).append(piece).push_back('\n');
  write_all(output_fd_, out);
  if (log_ == nullptr || log_->fd < 0) return;
  // The log keeps the line whole: pieces are joined there. Only a line from the rank's other
  // stream, coming in the middle, ends it early (the rest follows on a line of its own).
  if (log_->open_stream >= 0 && log_->open_stream != output_fd_) write_all(log_->fd, "\n");
  std::string_view text(out);
  text.remove_prefix(prefix.size());
  if (!line_ends) text.remove_suffix(1);
  write_all(log_->fd, text);
  log_->open_stream = line_ends ? -1 : output_fd_;
}

}  // namespace tensorplay::launch
