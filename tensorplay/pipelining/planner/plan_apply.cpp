// Running a plan (plan_apply.h).
#include "tensorplay/pipelining/planner/plan_apply.h"

#include <stdexcept>
#include <string>

#include "tensorplay/schedules/csv.h"

namespace tensorplay::pipelining {

ScheduleOptions schedule_options(const Plan& plan) {
  ScheduleOptions options;
  options.stages_per_rank = plan.stages_per_rank;
  options.order = schedules::parse_csv(plan.order_csv);
  return options;
}

void apply_plan(const Plan& plan, const std::vector<std::shared_ptr<PipelineStage>>& stages) {
  for (const auto& stage : stages) {
    if (stage->num_stages() != plan.num_stages())
      throw std::invalid_argument(
          "plan for " + plan.model + " has " + std::to_string(plan.num_stages()) +
          " stages but stage " + std::to_string(stage->stage_index()) +
          " belongs to a pipeline of " + std::to_string(stage->num_stages()) +
          "; build the pipeline with the plan's split_spec()");
    stage->set_recompute(plan.recompute_policy(stage->stage_index()));
    stage->set_num_threads(plan.threads);
  }
}

}  // namespace tensorplay::pipelining
