// Relays one stream (stdout or stderr) of one rank: cuts what the rank writes into lines, writes
// each whole line with a "[rank R] " prefix to the launcher's own stream in one go, so lines of
// different ranks never mix, and copies it unprefixed to the rank's log file when there is one.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tensorplay::launch {

/// The log file that a rank's two relays (stdout and stderr) share, and which of them is in the
/// middle of a long line there.
struct RankLog {
  int fd = -1;           ///< the rank's log file, or -1 for none
  int open_stream = -1;  ///< output fd of the relay whose long line the file ends in, or -1
};

class LineRelay {
 public:
  /// Longest piece of a line that is relayed at once: a longer line goes out in pieces, so a rank
  /// that prints without newlines cannot grow the launcher's memory without bound.
  static constexpr std::size_t kMaxPieceBytes = 64 * 1024;

  /// `output_fd`: the launcher's stdout or stderr (each relay of a rank has its own); `log`: the
  /// rank's log, or null. `log` must outlive the relay.
  LineRelay(int rank, int output_fd, RankLog* log);

  /// Takes bytes as the rank wrote them and passes on every line they complete. A line longer
  /// than kMaxPieceBytes goes out in pieces (cut between UTF-8 characters): the first with the
  /// prefix "[rank R] ", each further one with "[rank R+] ", meaning "continues this rank's last
  /// line on this stream". The log file gets the pieces joined, the line whole.
  void feed(std::string_view bytes);
  /// Passes on an unterminated last line, if any; called at end of stream.
  void finish();

 private:
  void emit_full_pieces();
  void emit(std::string_view piece, bool line_ends);

  std::string prefix_;            ///< "[rank R] "
  std::string continued_prefix_;  ///< "[rank R+] "
  int output_fd_;
  RankLog* log_;
  std::string pending_;      ///< the start of a line whose newline has not come yet
  bool continuing_ = false;  ///< part of the current line has gone out already
};

}  // namespace tensorplay::launch
