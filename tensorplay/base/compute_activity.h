// How many of this process's threads are computing now: helper threads that poll (the UCX
// progress thread) read it to leave the core to the compute on a rank that has only one.
#pragma once

namespace tensorplay::inline base {

/// Marks the calling thread as computing while it lives (the runtime holds one around each
/// pipeline action). Nests: each scope counts once.
class ComputeScope {
 public:
  ComputeScope();
  ~ComputeScope();
  ComputeScope(const ComputeScope&) = delete;
  ComputeScope& operator=(const ComputeScope&) = delete;
};

/// Threads of this process inside a ComputeScope now (a relaxed read: a hint for pollers).
int threads_computing();

}  // namespace tensorplay::inline base
