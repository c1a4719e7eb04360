// Work at fixed points of a training step beside the ranks' own: summing tied parameters' gradients
// over their copies, averaging gradients over data-parallel replicas. Adding one touches no other.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorplay/pipelining/runtime/detail/rank_runtime.h"

namespace tensorplay::pipelining::detail {

/// One piece of a training step's bookkeeping. The driver calls, for step `step`: begin before
/// the ranks get it; ranks_stopped once they all finished or were told to drop it; then finish
/// (every local rank finished) or abandon (the step failed, possibly before begin). Hooks run in
/// the order they were added.
class StepHook {
 public:
  virtual ~StepHook() = default;
  virtual void begin(uint64_t step) { (void)step; }
  /// `failed`: the step failed; `quiesced`: no local rank is still computing it.
  virtual void ranks_stopped(uint64_t step, bool failed, bool quiesced) {
    (void)step, (void)failed, (void)quiesced;
  }
  /// May throw: the step then fails, and this hook and the later ones are abandoned.
  virtual void finish(uint64_t step, Deadline deadline) { (void)step, (void)deadline; }
  virtual void abandon(uint64_t step, const std::string& why) { (void)step, (void)why; }
};

/// The hooks of a schedule, run in order.
class StepHooks {
 public:
  void add(std::unique_ptr<StepHook> hook) { hooks_.push_back(std::move(hook)); }
  void begin(uint64_t step);
  void ranks_stopped(uint64_t step, bool failed, bool quiesced);
  /// Finishes every hook in order; when one throws, it and the later ones are abandoned and the
  /// error propagates.
  void finish(uint64_t step, Deadline deadline);
  void abandon(uint64_t step, const std::string& why);

 private:
  std::vector<std::unique_ptr<StepHook>> hooks_;
};

}  // namespace tensorplay::pipelining::detail
