// How every tensorplay program sets up spdlog: one line pattern, the level from SPDLOG_LEVEL, the
// terminal quiet by default, and sinks (a file, a buffer) that receive every event.
#pragma once

#include <memory>
#include <string>

namespace spdlog {
class logger;
namespace sinks {
class sink;
}  // namespace sinks
}  // namespace spdlog

namespace tensorplay::inline base {

/// The pattern of every log line: `[12:34:56.789012] [tensorplay] text`.
inline constexpr const char* kLogPattern = "[%H:%M:%S.%f] [%n] %v";

/// The logger `name`, made on its first call: on standard error with kLogPattern, off unless
/// SPDLOG_LEVEL sets its level (spdlog's syntax: `debug`, or `tensorplay=debug` for it alone).
/// A logger of that name made elsewhere is taken over and configured the same way.
std::shared_ptr<spdlog::logger> configure_logger(const std::string& name);

/// Adds `sink` (a file, a buffer) to the logger, with kLogPattern. Unless SPDLOG_LEVEL is set, the
/// logger is set to debug so that the sink receives every event, and the terminal (the logger's
/// first sink) stays quiet; when it is set, its level rules the sink and the terminal alike.
void add_debug_sink(spdlog::logger& logger, std::shared_ptr<spdlog::sinks::sink> sink);

}  // namespace tensorplay::inline base
