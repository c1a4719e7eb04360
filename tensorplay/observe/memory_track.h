// A step's memory track from the message log: the bytes each rank held after each action (the
// log's `event=memory what=bytes:N` lines), on the times of step_timeline's timeline.
#pragma once

#include <cstdint>
#include <vector>

#include "tensorplay/observe/trace_log.h"
#include "tensorplay/schedules/simulator.h"

namespace tensorplay::pipelining {

/// The samples of `step`, per rank in log order, in microseconds from the step's first action
/// start (as step_timeline counts). Empty when the log has no memory lines (a log written
/// before they existed). Throws std::invalid_argument naming the line's text when a memory
/// line does not parse.
std::vector<schedules::MemorySample> memory_track(const std::vector<LogEvent>& events,
                                                  uint64_t step);

/// Each rank's largest sample (index = rank; 0 for ranks without samples).
std::vector<double> most_held(const std::vector<schedules::MemorySample>& track, int ranks);

}  // namespace tensorplay::pipelining
