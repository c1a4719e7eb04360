// Checks an order loaded from outside before a schedule runs it.
#include "tensorplay/pipelining/runtime/detail/given_order.h"

#include <algorithm>
#include <stdexcept>

#include "tensorplay/schedules/errors.h"
#include "tensorplay/schedules/lowering.h"
#include "tensorplay/schedules/validator.h"

namespace tensorplay::pipelining::detail {

schedules::PipelineOrder checked_order(const std::string& schedule,
                                       const schedules::PipelineOrder& order, int num_stages,
                                       int n_microbatches,
                                       const std::vector<int>& stage_to_rank) {
  const int ranks =
      stage_to_rank.empty() ? 0 : *std::max_element(stage_to_rank.begin(), stage_to_rank.end()) + 1;
  if (static_cast<int>(order.size()) != ranks)
    throw std::invalid_argument(schedule + ": the given order has " + std::to_string(order.size()) +
                                " rows, but its " + std::to_string(num_stages) + " stages run on " +
                                std::to_string(ranks) + " ranks; give one row per rank");
  schedules::PipelineOrder compute = schedules::strip_communication(order);
  try {
    schedules::validate_order(compute, num_stages, n_microbatches, &stage_to_rank);
  } catch (const schedules::ScheduleError& e) {
    throw schedules::ScheduleError(
        schedule + ": the given order cannot run (" + std::to_string(num_stages) + " stages, " +
        std::to_string(n_microbatches) + " microbatches): " + e.what());
  }
  return compute;
}

}  // namespace tensorplay::pipelining::detail
