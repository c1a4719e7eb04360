// Exception type of the schedules layer: a schedule that is malformed, cannot run, or would
// deadlock. Argument errors (bad ranks, microbatch counts, names) throw std::invalid_argument.
#pragma once

#include <stdexcept>
#include <string>

namespace tensorplay::schedules {

/// A schedule (order, CSV, policy run) that cannot be executed as given. The message says what is
/// wrong and, where it helps, holds the step-by-rank table with the failing step marked.
class ScheduleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tensorplay::schedules
