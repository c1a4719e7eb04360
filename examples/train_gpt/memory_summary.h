// What each rank held in memory over a run, measured by schedule.memory_stats() after every
// training step: the highest peak per rank, shared among the ranks for the summary.
#pragma once

#include <vector>

#include "tensorplay/distributed/process_group.h"
#include "tensorplay/pipelining/runtime/memory_stats.h"

namespace train_gpt {

/// Each rank's highest measured bytes over the steps seen.
class MemorySummary {
 public:
  /// Keeps the higher of the peaks seen so far and `stats`' (this process's ranks).
  void add(const tensorplay::pipelining::MemoryStats& stats);
  /// Makes every rank's figures known to every process (an all-reduce over `group`; every
  /// process of the pipeline calls it, with `ranks` the pipeline's rank count).
  void share(const tensorplay::distributed::ProcessGroup* group, int ranks);
  /// "  rank R: measured peak X MiB (activations A MiB, parameters P MiB, optimizer O MiB)"
  /// lines; nothing when no step was measured.
  void print() const;

 private:
  struct Rank {
    double peak = 0, activations = 0, parameters = 0, optimizer = 0;
  };
  std::vector<Rank> ranks_;
};

}  // namespace train_gpt
