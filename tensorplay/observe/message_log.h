// The message log: every message a stage actor receives, starts, finishes and sends, with a
// timestamp, through spdlog. Off by default; SPDLOG_LEVEL=debug (or tensorplay=debug) turns it on.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace spdlog {
class logger;
}

namespace tensorplay::pipelining {

/// The logger named "tensorplay" (created on first use; level from SPDLOG_LEVEL, else off).
/// Each line reads: `rank=R step=S event=E what=WHAT t_us=T` with T in microseconds on a steady
/// clock shared by all actors of the process. Each process start begins its part of the log with
/// a run header, `rank=R step=0 event=run what=job:J run:U attempt:A world:W t_us=T` (written
/// again, with the same run id U, when the process learns its job at init_process_group): J is
/// the job's id (the same on every rank of a job), U this process start's, A the launcher's
/// restart count and W the number of processes in the job (1 for an embedded run, whose one
/// process logs every rank). A rank's step begins with `event=recv what=step`, or `what=eval` for
/// an evaluation (PipelineSchedule::eval, forward only); S counts a schedule's calls of both kinds.
std::shared_ptr<spdlog::logger> message_log();

/// Also appends the message log to `path` (one file per rank under a launcher's log directory;
/// a restarted rank adds a run after the previous one's), starting with a run header, and turns
/// it on at debug level unless SPDLOG_LEVEL chose a level.
void log_to_file(const std::string& path);

/// Runs `body` with the message log written only to the returned string (at debug level when
/// `debug`, else at the level it has), then restores its sinks and level, also when `body`
/// throws. Not for while other threads log elsewhere: the log's sinks are the process's.
std::string capture_message_log(const std::function<void()>& body, bool debug = true);

/// True when the message log records events (so callers may skip formatting them).
bool message_log_enabled();

/// Records which job this process belongs to: `job_id` (empty: keep this process's own, made at
/// its start), its `rank` among `world_size` processes and the launcher's restart count
/// `attempt`. Writes a run header when the log is on; init_process_group calls it.
void set_log_job(const std::string& job_id, int rank, int world_size, int attempt);
/// The job id run headers record (this process's own until set_log_job gives another).
std::string log_job_id();
/// This process start's run id (random, made once per process).
const std::string& log_run_id();

/// Records that rank `rank` rejected a malformed or out-of-range message from another process
/// (`why`): counted, written to the message log, and to stderr for the first few (then once per
/// 10,000), so a flood cannot drown the output.
void note_rejected_message(int rank, const std::string& why);
/// Messages rejected by this process so far.
unsigned long long rejected_message_count();

/// Writes one log line when the logger is at debug level (after this process's run header, the
/// first time).
void log_event(int rank, unsigned long long step, const char* event, const std::string& what);

/// The message log's clock: microseconds on the steady clock its lines' `t_us` are read from.
long long message_log_now_us();

/// log_event for an event that happened at `t_us` (message_log_now_us() then) and is written
/// after the fact, so that formatting the line stays off the path the event starts: a send is
/// written once its message is on its way.
void log_event_at(int rank, unsigned long long step, const char* event, const std::string& what,
                  long long t_us);

}  // namespace tensorplay::pipelining
