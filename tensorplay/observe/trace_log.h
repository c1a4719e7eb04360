// Reading the message log back: its lines as events split into runs (one per process start),
// several processes' logs of one job put on one clock and checked for missing or cut ranks, and
// one step's compute actions as a timeline with the simulator's figures (makespan, bubble, peak
// stashed activations).
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tensorplay/schedules/simulator.h"

namespace tensorplay::pipelining {

/// One line of the message log (`rank=R step=S event=E what=WHAT t_us=T`).
struct LogEvent {
  int rank = 0;
  uint64_t step = 0;
  std::string event;  ///< recv, start, finish, send, done (the rank's step is over), or clock
                      ///< (once per process, at init)
  std::string what;   ///< an action ("1F0") for start and finish; `offset_us:N` for clock; a
                      ///< message otherwise
  int64_t t_us = 0;   ///< microseconds on rank 0's clock (the process's steady clock plus the
                      ///< offset of its clock line; the process's own clock when it has none)
};

/// What a process records at the start of its part of a log (an `event=run` line).
struct RunHeader {
  std::string job_id;  ///< the same on every rank of one job
  std::string run_id;  ///< new at every process start
  int attempt = 0;     ///< the launcher's restart count
  int rank = 0;        ///< the process's rank in its job
  int world_size = 1;  ///< processes in the job (1: an embedded run, every rank in one process)
};

/// One process start's part of a log: its header and the lines after it, up to the next run's.
struct LogRun {
  bool has_header = false;       ///< false: lines written before logs had run headers
  RunHeader header;              ///< the last header of this run id (init may rewrite it)
  std::vector<LogEvent> events;  ///< every line but the headers, on rank 0's clock
};

/// The runs of the log `in`, in order. A header line starts a run, unless it repeats the run id
/// of the run before it (the same process naming its job at init); lines before the first
/// header (a log written before headers) make a run without one. A `clock` line (`what=
/// offset_us:N`, written at init) gives the microseconds to add to this process's clock to read
/// rank 0's: N is added to every event of its run, before the line as well as after it (a later
/// clock line, from a second init, takes over from there on). Without a clock line the offset is
/// 0, as for an embedded run. Other lines (output of the program, other loggers) are skipped.
/// Throws std::invalid_argument naming the line number when a line has the log's fields but a
/// value that does not parse.
std::vector<LogRun> parse_log_runs(std::istream& in);

/// Every event of every run in `in` (parse_log_runs), headers left out: for a log known to hold
/// one run, such as one captured in memory.
std::vector<LogEvent> parse_message_log(std::istream& in);

/// The events of one process's log file, as parse_message_log returns them.
struct MessageLogFile {
  std::string name;              ///< how errors name the file (its path)
  std::vector<LogEvent> events;  ///< already on rank 0's clock
};

/// Several processes' logs as one list that step_timeline reads (file after file, each in its
/// own order). Each rank must come from one file: throws std::invalid_argument naming both files
/// when a rank has events in two (the same log passed twice, or logs of two runs), since their
/// actions would overlap and give negative idle times.
std::vector<LogEvent> merge_message_logs(const std::vector<MessageLogFile>& logs);

/// A log file read as runs.
struct MessageLogRuns {
  std::string name;          ///< how errors name the file (its path)
  std::vector<LogRun> runs;  ///< parse_log_runs of its text
};

/// One job's logs, one run of each file, merged and checked (read_job_log).
struct JobLog {
  std::vector<LogEvent> events;              ///< the runs read, merged (merge_message_logs)
  std::map<int, std::string> file_of_rank;   ///< the file each rank's events came from
  std::vector<int> expected_ranks;           ///< the ranks whose logs a step needs, in order
  std::string expected_why;                  ///< where a rank with no events is expected from
  std::set<int> checked_ranks;               ///< ranks whose runs have headers (and `done` lines)
  std::map<int, std::set<uint64_t>> logged;  ///< per rank, the steps it has events of
  std::map<int, std::set<uint64_t>> done;    ///< per rank, the steps it logged to the end
  std::vector<std::string> empty_files;      ///< files without a single message-log line
  std::vector<std::string> notes;  ///< to tell before any figure: the runs a file holds and the
                                   ///< one read; "warning: " logs that cannot be checked
  size_t most_runs = 0;            ///< the most runs one file holds
};

/// Reads run `run` of every file (1 the first of each, 0 each file's newest) as one job's logs.
/// Throws std::invalid_argument, naming the files, when the runs read are of different jobs (the
/// two job ids), of different attempts (restarts) of one job or disagree on the job's size, when
/// a file has no run `run` (naming the runs it has), or when a rank is in two files. A run
/// without a header (an older log) is read with a warning in `notes` that it cannot be checked.
JobLog read_job_log(const std::vector<MessageLogRuns>& files, int run = 0);

/// Why step `step` cannot be measured from `log`, naming the ranks and files: an expected rank
/// with no log or whose log ends before the step, a rank whose run has a header but no `done`
/// line for the step (its log was cut inside it, or the step failed there), and empty files.
/// Empty when every expected rank logged the whole step.
std::string step_gaps(const JobLog& log, uint64_t step);

/// The logged steps that every expected rank logged whole (step_gaps is empty), in order.
std::vector<uint64_t> complete_steps(const JobLog& log);

/// The steps that have events other than clock lines, in increasing order.
std::vector<uint64_t> logged_steps(const std::vector<LogEvent>& events);

/// The steps logged as evaluations (forward only: their `recv` line reads `what=eval`), in
/// increasing order. The log numbers a schedule's calls, training and evaluation alike.
std::vector<uint64_t> evaluation_steps(const std::vector<LogEvent>& events);

/// How a trainer counts the log's steps: training steps (PipelineSchedule::step) from 1, the
/// evaluations between them left out. `log_step` numbers are the log's own.
struct TrainingStep {
  uint64_t number = 0;    ///< the training step's number: 1 for the first step trained
  uint64_t log_step = 0;  ///< its `step=` in the log
};

/// The log's training steps (logged_steps less evaluation_steps) in increasing order, each
/// numbered as a trainer counts it: its log step less the evaluations logged before it.
std::vector<TrainingStep> training_steps(const std::vector<LogEvent>& events);

/// Step `step`'s compute actions as they ran (from one schedule's log: each schedule numbers its
/// own steps): each start paired with its finish on the same rank, times in microseconds from the
/// step's first start; clock lines are ignored. The figures follow the simulator's definitions:
/// makespan, per-rank busy and idle time, bubble fraction, and peak activations held (a forward's
/// start to the end of its B or W). Throws std::invalid_argument when the step has no compute
/// events, or names the rank and action of a start without a finish.
schedules::SimulationResult step_timeline(const std::vector<LogEvent>& events, uint64_t step);

}  // namespace tensorplay::pipelining
