// The planner: given a profile, world size, memory cap and batch, it simulates every schedule,
// stages per rank, microbatch count, cut, recomputation and thread count, and ranks them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorplay/pipelining/planner/plan_request.h"
#include "tensorplay/pipelining/planner/profile.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/schedules/simulator.h"

namespace tensorplay::pipelining {

/// Searches the space of `request` on `profile`. Throws std::invalid_argument for a bad request
/// (world < 1, batch < 1, a channel the profile lacks).
PlanResult plan(const Profile& profile, const PlanRequest& request);

/// Predicts one configuration (its stage_begin, recompute and threads as given) as plan() does.
PlanChoice predict(const Profile& profile, const PlanRequest& request, PlanChoice choice);

/// The simulator's whole step for one configuration as predict() evaluates it, the pipeline
/// only (no optimizer step): the timeline in seconds and, when the profile has bytes, each
/// rank's predicted bytes (peak_bytes, memory_track).
schedules::SimulationResult simulate_choice(const Profile& profile, const PlanRequest& request,
                                            PlanChoice choice);

/// Stage boundaries minimising the slowest stage: per stage the first segment, for `stages`
/// contiguous non-empty stages over `costs` (one per segment). Throws when stages > costs.
std::vector<int> balanced_stage_begins(const std::vector<double>& costs, int stages);

}  // namespace tensorplay::pipelining
