// The message log: every message a stage actor receives, starts, finishes and sends, with a
// timestamp, through spdlog. Off by default; SPDLOG_LEVEL=debug (or tensorplay=debug) turns it on.
#pragma once

#include <memory>
#include <string>

namespace spdlog {
class logger;
}

namespace tensorplay::pipelining {

/// The logger named "tensorplay" (created on first use; level from SPDLOG_LEVEL, else off).
/// Each line reads: `rank=R step=S event=E what=WHAT t_us=T` with T in microseconds on a steady
/// clock shared by all actors of the process.
std::shared_ptr<spdlog::logger> message_log();

/// Also writes the message log to `path` (one file per rank under a launcher's log directory),
/// and turns it on at debug level unless SPDLOG_LEVEL chose a level.
void log_to_file(const std::string& path);

/// True when the message log records events (so callers may skip formatting them).
bool message_log_enabled();

/// Records that rank `rank` rejected a malformed or out-of-range message from another process
/// (`why`): counted, written to the message log, and to stderr for the first few (then once per
/// 10,000), so a flood cannot drown the output.
void note_rejected_message(int rank, const std::string& why);
/// Messages rejected by this process so far.
unsigned long long rejected_message_count();

/// Writes one log line when the logger is at debug level.
void log_event(int rank, unsigned long long step, const char* event, const std::string& what);

}  // namespace tensorplay::pipelining
