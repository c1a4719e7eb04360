// Running a child command from a benchmark and reading what it printed: its output lines, the
// numbers of a JSON line, quoting for the shell. Shared by benchmarks that start peers.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace bench {

/// What a command printed, line by line, and how it ended.
struct CommandOutput {
  std::vector<std::string> lines;  ///< without line endings; empty lines dropped
  int exit_code = -1;              ///< -1 when it could not start or was killed by a signal
};

/// Runs `command` through the shell, reading its standard output (add 2>&1 for both streams).
inline CommandOutput run_command(const std::string& command) {
  CommandOutput out;
  std::fflush(stdout);
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  std::string line;
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), pipe)) {
    line += buffer;
    if (line.back() != '\n') continue;  // a line longer than the buffer: keep reading it
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (!line.empty()) out.lines.push_back(line);
    line.clear();
  }
  if (!line.empty()) out.lines.push_back(line);
  int status = pclose(pipe);
  out.exit_code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

/// The last `count` lines of `out`, joined, for an error message.
inline std::string tail_of(const CommandOutput& out, size_t count = 20) {
  std::string text;
  size_t first = out.lines.size() > count ? out.lines.size() - count : 0;
  for (size_t i = first; i < out.lines.size(); ++i) text += "  " + out.lines[i] + "\n";
  return text;
}

/// `text` in single quotes, safe as one shell word.
inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

/// The number after "key": in a JSON line, if present.
inline std::optional<double> json_number(const std::string& line, const std::string& key) {
  size_t at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return std::nullopt;
  const char* start = line.c_str() + at + key.size() + 3;
  char* end = nullptr;
  double value = std::strtod(start, &end);
  if (end == start) return std::nullopt;  // null, a string or an object
  return value;
}

/// `text` as a JSON string (quotes, backslashes and control characters escaped).
inline std::string json_quote(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      quoted += ' ';
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

/// The path of this executable (for a benchmark that starts copies of itself).
inline std::string self_executable() {
  std::string path(4096, '\0');
  ssize_t n = readlink("/proc/self/exe", path.data(), path.size());
  if (n <= 0) return "";
  path.resize(static_cast<size_t>(n));
  return path;
}

}  // namespace bench
