// Checking an order given from outside (a CSV, PyTorch's _load_csv) against the stages and
// placement of the schedule that will run it. Private to the schedule driver.
#pragma once

#include <string>
#include <vector>

#include "tensorplay/schedules/action.h"

namespace tensorplay::pipelining::detail {

/// `order` without communication actions, after checking it: one row per rank of
/// `stage_to_rank`, every stage on the rank the schedule places it, each action once, no
/// deadlock. Throws schedules::ScheduleError with the validator's step-by-rank table, or
/// std::invalid_argument for a wrong number of rows, each naming `schedule`.
schedules::PipelineOrder checked_order(const std::string& schedule,
                                       const schedules::PipelineOrder& order, int num_stages,
                                       int n_microbatches, const std::vector<int>& stage_to_rank);

}  // namespace tensorplay::pipelining::detail
