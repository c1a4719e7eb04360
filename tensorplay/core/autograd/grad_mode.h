// Whether operations record autograd history on this thread, and the guard that turns it off.
#pragma once

namespace tensorplay::autograd {

/// True unless a NoGradGuard is alive on this thread.
bool grad_enabled();
void set_grad_enabled(bool enabled);

/// Disables history recording for its lifetime (like torch::NoGradGuard).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace tensorplay::autograd

namespace tensorplay {
using autograd::NoGradGuard;
}
