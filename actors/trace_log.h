// Reading the message log back: its lines as events, several processes' logs put on one clock,
// and one step's compute actions as a timeline with the simulator's figures (makespan, bubble,
// peak stashed activations).
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "schedules/simulator.h"

namespace tensorplay::pipelining {

/// One line of the message log (`rank=R step=S event=E what=WHAT t_us=T`).
struct LogEvent {
  int rank = 0;
  uint64_t step = 0;
  std::string event;  ///< recv, start, finish, send, or clock (once per process, at init)
  std::string what;   ///< an action ("1F0") for start and finish; `offset_us:N` for clock; a
                      ///< message otherwise
  int64_t t_us = 0;   ///< microseconds on rank 0's clock (the process's steady clock plus the
                      ///< offset of its clock line; the process's own clock when it has none)
};

/// Every message-log line in `in`, the log of one process; other lines (output of the program,
/// other loggers) are skipped. A `clock` line (`what=offset_us:N`, written at init) gives the
/// microseconds to add to this process's clock to read rank 0's: N is added to every event of
/// `in`, before the line as well as after it (a later clock line, from a second init, takes over
/// from there on). Without a clock line the offset is 0, as for an embedded run. Throws
/// std::invalid_argument naming the line number when a line has the log's fields but a value
/// that does not parse.
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

/// The steps that have events other than clock lines, in increasing order.
std::vector<uint64_t> logged_steps(const std::vector<LogEvent>& events);

/// Step `step`'s compute actions as they ran (from one schedule's log: each schedule numbers its
/// own steps): each start paired with its finish on the same rank, times in microseconds from the
/// step's first start; clock lines are ignored. The figures follow the simulator's definitions:
/// makespan, per-rank busy and idle time, bubble fraction, and peak activations held (a forward's
/// start to the end of its B or W). Throws std::invalid_argument when the step has no compute
/// events, or names the rank and action of a start without a finish.
schedules::SimulationResult step_timeline(const std::vector<LogEvent>& events, uint64_t step);

}  // namespace tensorplay::pipelining
