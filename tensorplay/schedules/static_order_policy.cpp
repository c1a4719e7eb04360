// The static-order policy: follows a generated (or loaded) order, waiting for each action's inputs.
#include "tensorplay/schedules/detail/static_order_policy.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tensorplay::schedules {

std::unique_ptr<SchedulePolicy> make_static_order_policy(RankOrder compute_order) {
  return std::make_unique<detail::StaticOrderPolicy>(std::move(compute_order));
}

}  // namespace tensorplay::schedules
