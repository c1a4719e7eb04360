// The tied-gradient hook: sums each tied parameter's gradient over its copies when a step's ranks
// stop, as the unsplit model's one parameter would hold it.
#pragma once

#include <memory>
#include <vector>

#include "tensorplay/pipelining/runtime/detail/schedule_spec.h"
#include "tensorplay/pipelining/runtime/detail/step_hooks.h"

namespace tensorplay::pipelining::detail {

/// Sums each tied parameter's gradient over its copies when a step's ranks stop, as the unsplit
/// model's one parameter would hold it: in this process (embedded, also after a failure once the
/// ranks are quiet), or across the processes holding a copy through an all-reduce among exactly
/// them (`group_ranks`: the schedule's global ranks; empty in the embedded runtime).
std::unique_ptr<StepHook> make_tied_gradient_hook(const ScheduleSpec& spec,
                                                  const std::vector<int>& group_ranks);

}  // namespace tensorplay::pipelining::detail
