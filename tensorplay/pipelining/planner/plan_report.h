// The planner's answer in words: the best few configurations with their predictions, and why the
// others lost, counted by reason.
#pragma once

#include <string>

#include "tensorplay/pipelining/planner/plan.h"

namespace tensorplay::pipelining {

/// The `top` best feasible configurations (predicted step, bubble, peak bytes per rank), then
/// the losers counted by reason (over the memory cap, sizes the schedule refuses, bubble,
/// communication, compute) each with its closest example.
std::string format_plan_report(const PlanResult& result, int top = 5);

}  // namespace tensorplay::pipelining
