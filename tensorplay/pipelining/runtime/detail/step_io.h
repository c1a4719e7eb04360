// A step's arguments turned into what the stage workers read (microbatch inputs and keyword
// inputs, targets, loss seeds), and the workers' per-microbatch outputs turned back into what
// step() returns. Private to the schedule driver.
#pragma once

#include <string>
#include <vector>

#include "tensorplay/pipelining/runtime/schedule_options.h"
#include "tensorplay/pipelining/runtime/step_data.h"

namespace tensorplay::pipelining::detail {

/// What prepare_step needs to know about the schedule.
struct StepPlan {
  std::string name;                ///< the schedule's name, for errors
  int n_microbatches = 0;          ///< microbatches per step
  PipelineStage* first = nullptr;  ///< stage 0 when this process hosts it
  bool hosts_last = false;         ///< this process hosts the last stage
  const ScheduleOptions* options = nullptr;
};

/// Fills `data`'s microbatch inputs (when this process hosts stage 0), targets and loss seeds
/// (when it hosts the last stage). Keyword inputs of a traced stage (a StageModule) become its
/// trailing positional inputs, as pipeline() traced them; a hand-built stage's module gets them
/// as keyword inputs. Throws std::invalid_argument naming the input and what to do.
void prepare_step(StepData& data, const StepPlan& plan, const std::vector<Tensor>& args,
                  const nn::TensorDict& kwargs, const StepOptions& step_options);

/// The outputs of a finished step, merged by options.output_merge_spec (empty when no outputs
/// were recorded here).
StepOutput collect_outputs(const StepData& data, const ScheduleOptions& options);

/// Throws std::invalid_argument unless `kind` may have a custom function (OVERLAP_F_B only).
void check_custom_kind(schedules::ActionKind kind);

/// StepData::overlap_fb for a registered custom function (null when none): checks that the
/// function ran each sub-action exactly once.
std::function<void(const schedules::Action&, int,
                   const std::function<void(const schedules::Action&)>&)>
overlap_runner(const CustomFunction& function);

}  // namespace tensorplay::pipelining::detail
