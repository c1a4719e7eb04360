// The step driver: runs one step on a RankRuntime (dispatch, wait with a deadline, ask every rank
// what it waits for on a timeout, abort on a failure) and refuses a step while a rank is still in
// a failed one. Free of CAF; tested with a stand-in runtime.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorplay/pipelining/runtime/detail/rank_runtime.h"

namespace tensorplay::pipelining::detail {

/// How a step ended on this process's ranks.
struct StepOutcome {
  std::string failure;             ///< empty: every local rank finished
  std::vector<std::string> stuck;  ///< ranks still computing after the abort (not waited for)
  bool ok() const { return failure.empty(); }
  /// True when no local rank is still computing the step.
  bool quiesced() const { return stuck.empty(); }
  /// The error a failed step throws: the failure, the ranks not waited for, and what the caller
  /// may rely on (`training`: gradients are partial; eval: parameters unchanged).
  std::string message(bool training) const;
};

class StepDriver {
 public:
  /// `name` (the schedule's) prefixes errors; a step not done within `step_timeout` fails.
  StepDriver(std::string name, std::chrono::milliseconds step_timeout);

  /// The next step's number (1, 2, ...): consumed even when the step fails, so ranks stay in step.
  uint64_t next_step() { return next_step_++; }
  /// Throws PipelineError when a local rank is still computing the last failed step.
  void check_not_stuck(RankRuntime& ranks);
  /// Runs step `data->step` on `ranks`: returns when every local rank is done, one failed (the
  /// others told to drop it), or the step timed out (every rank asked what it waits for).
  StepOutcome run(RankRuntime& ranks, std::shared_ptr<StepData> data);
  /// When the step that began at `started` must be over (hooks finish within it).
  Deadline deadline_of(std::chrono::steady_clock::time_point started) const {
    return started + step_timeout_;
  }

 private:
  /// Waits for every local rank's report; returns the failure (empty: all done).
  std::string wait(RankRuntime& ranks, uint64_t step, Deadline deadline, bool& timed_out);

  std::string name_;
  std::chrono::milliseconds step_timeout_;
  uint64_t next_step_ = 1;
  /// The last step that failed while a local rank had not dropped it (0: none).
  uint64_t last_failed_step_ = 0;
};

}  // namespace tensorplay::pipelining::detail
