// The ranks a step driver drives: this process's stage actors (every rank in the embedded runtime,
// one rank under a launcher) and the way to reach the others. Free of CAF, so that the driver can
// be tested with a stand-in.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorplay/pipelining/runtime/step_data.h"

namespace tensorplay::pipelining::detail {

using Deadline = std::chrono::steady_clock::time_point;

/// What a rank reported about the step the driver dispatched.
struct RankReport {
  bool done = false;  ///< finished its part; otherwise failed with `what`
  int rank = 0;       ///< schedule rank
  std::string what;
};

class RankRuntime {
 public:
  virtual ~RankRuntime() = default;
  /// True when the other ranks run in other processes.
  virtual bool distributed() const = 0;
  /// This process's schedule rank (0 in the embedded runtime, which hosts them all).
  virtual int rank() const { return 0; }
  /// How many ranks this process hosts (the reports a step waits for).
  virtual int local_ranks() const = 0;
  /// "rank R" (embedded) or "rank G (host)" across processes, for messages.
  virtual std::string describe_rank(int rank) const = 0;
  /// The stream tagging this schedule's traffic on a shared channel (0 embedded).
  virtual uint32_t stream() const { return 0; }
  /// Hands `data` (its step number inside) to every local rank.
  virtual void dispatch(std::shared_ptr<StepData> data) = 0;
  /// The next report about step `step`, or nothing once `deadline` passes.
  virtual std::optional<RankReport> next_report(uint64_t step, Deadline deadline) = 0;
  /// What every rank (other processes' too) does in `step`, asked all at once and answered by
  /// `deadline`: " [rank 0: ...] [rank 1: ...]", ranks computing first.
  virtual std::string collect_status(uint64_t step, Deadline deadline) = 0;
  /// Tells the local ranks to drop `step`, ends its posted receives and waits for the ranks
  /// until `deadline`; returns what each rank that has not dropped it is doing.
  virtual std::vector<std::string> abort(uint64_t step, Deadline deadline) = 0;
  /// Tells the other processes' ranks this rank's step `step` failed before it started.
  virtual void fail_step_everywhere(uint64_t step, const std::string& what) = 0;
  /// What a local rank that has not dropped step `step` yet is doing; empty when all have.
  virtual std::string still_in(uint64_t step) const = 0;
  /// Stops the local ranks and waits for them up to `wait`; returns what each that did not stop
  /// is doing (it is detached and ends when its compute returns). Idempotent.
  virtual std::vector<std::string> stop(std::chrono::milliseconds wait) = 0;
};

}  // namespace tensorplay::pipelining::detail
