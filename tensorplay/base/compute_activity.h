// What this process's ranks are doing now (computing, or inside a step waiting for input):
// helper threads that poll (the UCX progress thread) read it to share the cores with the compute.
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

/// Marks a rank of this process as inside a pipeline step while it lives (the runtime holds one
/// from a rank's step start to its end or failure): between its actions the rank waits for
/// another rank's output, and a poller that stays awake then hands it over sooner.
class StepScope {
 public:
  StepScope();
  ~StepScope();
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;
};

/// Ranks of this process inside a StepScope now (a relaxed read).
int ranks_in_step();

}  // namespace tensorplay::inline base
