// The schedule's step hooks, run in the order added at each fixed point of a training step.
#include "tensorplay/pipelining/runtime/detail/step_hooks.h"

namespace tensorplay::pipelining::detail {

void StepHooks::begin(uint64_t step) {
  for (auto& h : hooks_) h->begin(step);
}

void StepHooks::ranks_stopped(uint64_t step, bool failed, bool quiesced) {
  for (auto& h : hooks_) h->ranks_stopped(step, failed, quiesced);
}

void StepHooks::finish(uint64_t step, Deadline deadline) {
  for (size_t i = 0; i < hooks_.size(); ++i) {
    try {
      hooks_[i]->finish(step, deadline);
    } catch (const std::exception& e) {
      for (size_t j = i; j < hooks_.size(); ++j) hooks_[j]->abandon(step, e.what());
      throw;
    }
  }
}

void StepHooks::abandon(uint64_t step, const std::string& why) {
  for (auto& h : hooks_) h->abandon(step, why);
}

}  // namespace tensorplay::pipelining::detail
