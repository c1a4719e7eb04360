// tp-trace's predicted side: the simulator's step for a plan on its profile, set beside the
// measured step as figures (text or JSON) and as a second set of tracks in the pictures.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tensorplay/pipelining/planner/step_comparison.h"
#include "tensorplay/schedules/simulator.h"
#include "tools/timeline_output.h"

namespace tensorplay::tools {

/// The comparison as JSON: times in microseconds, each figure {predicted, measured, error}.
nlohmann::ordered_json comparison_json(const pipelining::StepComparison& comparison);

/// Writes the pictures `out` asks for with both steps: the Chrome trace with the measured ranks
/// as process "measured" and the predicted ones as process "predicted", the SVG with the
/// predicted timeline drawn under the measured one. `measured` is in microseconds, `predicted`
/// in seconds.
void write_side_by_side(const TimelineOutput& out, const schedules::SimulationResult& measured,
                        const schedules::SimulationResult& predicted, const std::string& title);

}  // namespace tensorplay::tools
