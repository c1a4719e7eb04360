// Reading the message log back: its lines as events, and one step's compute actions as a
// timeline with the simulator's figures (makespan, bubble, peak stashed activations).
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
  std::string event;  ///< recv, start, finish or send
  std::string what;   ///< an action ("1F0") for start and finish; a message otherwise
  int64_t t_us = 0;   ///< microseconds on the process's steady clock
};

/// Every message-log line in `in`; other lines (output of the program, other loggers) are
/// skipped. Throws std::invalid_argument naming the line number when a line has the log's
/// fields but a value that does not parse.
std::vector<LogEvent> parse_message_log(std::istream& in);

/// The steps that have events, in increasing order.
std::vector<uint64_t> logged_steps(const std::vector<LogEvent>& events);

/// Step `step`'s compute actions as they ran (from one schedule's log: each schedule numbers its
/// own steps): each start paired with its finish on the same rank, times in microseconds from the
/// step's first start. The figures follow the simulator's definitions: makespan, per-rank busy and
/// idle time, bubble fraction, and peak activations held (a forward's start to the end of its B or
/// W). Throws std::invalid_argument when the step has no compute events, or names the rank and
/// action of a start without a finish.
schedules::SimulationResult step_timeline(const std::vector<LogEvent>& events, uint64_t step);

}  // namespace tensorplay::pipelining
