// Relays one stream (stdout or stderr) of one rank: cuts what the rank writes into lines, writes
// each whole line with a "[rank R] " prefix to the launcher's own stream in one go, so lines of
// different ranks never mix, and copies it unprefixed to the rank's log file when there is one.
#pragma once

#include <string>
#include <string_view>

namespace tensorplay::launch {

class LineRelay {
 public:
  /// `output_fd`: the launcher's stdout or stderr; `log_fd`: the rank's log file, or -1.
  LineRelay(int rank, int output_fd, int log_fd);

  /// Takes bytes as the rank wrote them and passes on every line they complete.
  void feed(std::string_view bytes);
  /// Passes on an unterminated last line, if any; called at end of stream.
  void finish();

 private:
  void emit(std::string_view line);

  std::string prefix_;
  int output_fd_;
  int log_fd_;
  std::string pending_;  ///< the start of a line whose newline has not come yet
};

}  // namespace tensorplay::launch
