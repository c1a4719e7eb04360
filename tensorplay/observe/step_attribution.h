// Where a pipeline step's time went, per rank: its actions' own time, the schedule's bubble (the
// simulator replaying the rank's order with the measured action times), hand-offs, the runtime.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorplay/observe/trace_log.h"

namespace tensorplay::pipelining {

/// One rank's part of a step, in microseconds. compute + bubble + handoff + runtime = step_us,
/// every part at least 0. The idle time (step - compute) holds the hand-off waits; the bubble
/// is the replay's idle time, capped at what they leave of it (measured action times vary about
/// the means replayed); `runtime` is what is left: the time between actions that no input
/// waited on, and lateness passed on from other ranks (an upstream action that started late
/// sends late).
struct RankAttribution {
  int rank = 0;
  double step_us = 0;      ///< the step's makespan (first action start to last action end)
  double compute_us = 0;   ///< the rank's actions' own time (start to finish)
  double bubble_us = 0;    ///< idle time of the rank in the simulator's replay of the step: its
                           ///< order, each stage's mean measured action times, free transfers
  double handoff_us = 0;   ///< for each action that waited on another rank's output: from that
                           ///< output's send (or the rank turning free, when later) to its start
  double transfer_us = 0;  ///< the part of handoff_us up to the notification's arrival
  double dispatch_us = 0;  ///< the rest: arrival to the action's start (wake-ups, scheduling)
  double runtime_us = 0;   ///< step_us - compute - bubble - handoff (can be negative)
  int handoffs = 0;        ///< actions that waited on another rank's output
  /// The rank's compute thread (its stage actor's) over the step, from its `sched` line: time
  /// on a core, and time runnable but waiting for one; -1 when the log has no such line (and
  /// then absent from attribution_json).
  double thread_cpu_us = -1;
  double runnable_us = -1;
};

/// A step's attribution.
struct StepAttribution {
  uint64_t step = 0;
  double makespan_us = 0;        ///< measured, first action start to last action end
  double ideal_makespan_us = 0;  ///< the simulator's replay (the schedule's own ceiling)
  /// The runtime's part of step(): the first rank's step message (`recv what=step`) to the last
  /// rank's `done`; beyond the makespan it is the step's start and end. 0 when not logged.
  double step_span_us = 0;
  std::vector<RankAttribution> ranks;
};

/// Attributes step `step` of `events` (one job's log on one clock, as read_job_log gives it).
/// Throws std::invalid_argument as step_timeline does for a step it cannot measure.
StepAttribution attribute_step(const std::vector<LogEvent>& events, uint64_t step);

/// The mean of several steps' attributions, field by field (ranks matched by index); `step` is
/// the last one's. Throws std::invalid_argument when `steps` is empty.
StepAttribution mean_attribution(const std::vector<StepAttribution>& steps);

/// "  rank R: compute C + bubble B + hand-off H (transfer T, dispatch D, N waits) + runtime X us;
/// compute thread runnable, not running Y us" lines, one per rank, after a line with the
/// makespan, the ideal one and the step's span.
std::string format_attribution(const StepAttribution& a);

/// The attribution as JSON: {"makespan_us":..,"ideal_makespan_us":..,"step_span_us":..,
/// "ranks":[{"rank":0,...}]}.
std::string attribution_json(const StepAttribution& a);

}  // namespace tensorplay::pipelining
