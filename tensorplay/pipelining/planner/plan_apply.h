// Running a plan: the ScheduleOptions (stages per rank, the order) and the stage settings
// (recomputation, product threads) a plan file describes.
#pragma once

#include <memory>
#include <vector>

#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/pipelining/planner/plan_file.h"
#include "tensorplay/pipelining/runtime/schedule.h"

namespace tensorplay::pipelining {

/// ScheduleOptions for `plan`: its stages per rank and its order (the CSV it carries, checked
/// by the schedule when built). Other fields keep their defaults.
ScheduleOptions schedule_options(const Plan& plan);

/// Sets each of `stages` (any subset, by stage index) to the plan's recomputation and product
/// threads. Throws std::invalid_argument when a stage's index or count does not match the plan.
void apply_plan(const Plan& plan, const std::vector<std::shared_ptr<PipelineStage>>& stages);

}  // namespace tensorplay::pipelining
