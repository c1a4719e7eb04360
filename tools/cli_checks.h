// Command-line checks tp-sim and tp-trace share: unknown flags reported before anything else, and
// numbers that must be finite and >= 0 (a NaN cost would make the simulator spin, an infinite
// one print null figures). Header-only, for tools/ programs.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tensorplay::tools {

/// Checks argv against the options registered on `app` before CLI11 parses it, so that a
/// misspelt flag is reported as such rather than as a missing required one. Throws
/// std::invalid_argument naming the flag and pointing at --help.
inline void reject_unknown_flags(CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string token = argv[i];
    if (token == "--") return;  // the rest are positional
    if (token.size() < 3 || token.rfind("--", 0) != 0) continue;
    std::string name = token.substr(0, token.find('='));
    if (app.get_option_no_throw(name) == nullptr)
      throw std::invalid_argument("unknown option '" + name + "'; run with --help for the options");
  }
}

/// The number `text` as a whole (no trailing characters), or an error naming `flag`.
inline double parse_number(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw std::invalid_argument(flag + ": '" + text + "' is not a number");
  return value;
}

/// Throws std::invalid_argument naming `flag` unless `value` is finite and >= 0.
inline void require_finite_nonnegative(double value, const std::string& flag) {
  if (!std::isfinite(value) || value < 0)
    throw std::invalid_argument(flag + " is " + std::to_string(value) +
                                "; it must be a finite number >= 0");
}

}  // namespace tensorplay::tools
