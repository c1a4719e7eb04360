// Pictures of a simulated timeline: Chrome trace JSON (opens in Perfetto and chrome://tracing,
// one track per rank) and a self-contained SVG, both coloured by action kind.
#pragma once

#include <string>

#include "tensorplay/schedules/simulator.h"

namespace tensorplay::schedules {

/// Colour of an action kind in the pictures ("#4caf50" for F, ...).
std::string kind_color(ActionKind kind);

/// Chrome trace JSON: one "X" event per action, pid 0, tid = rank (named "rank N"), one time
/// unit of the cost model shown as `microseconds_per_unit` microseconds; the memory track, when
/// there is one, as a counter per rank ("memory rank N", bytes). Sharding actions (UNSHARD,
/// RESHARD, REDUCE_GRAD), when there are any, go on a track of their own under each rank's
/// ("rank N collectives", tid = ranks + N).
std::string chrome_trace_json(const SimulationResult& result, double microseconds_per_unit = 1000);

/// An SVG timeline: one row per rank, one box per action labelled when wide enough, a line of
/// the bytes each rank holds when there is a memory track, a time axis and a legend. `title` goes
/// above the picture.
std::string timeline_svg(const SimulationResult& result, const std::string& title = "");

}  // namespace tensorplay::schedules
