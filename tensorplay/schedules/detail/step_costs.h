// The simulator's cost tables: each stage's F, I, W and B durations and each boundary's transfer
// time, read once from the cost model. Private to the simulator (simulator.cpp, static_sweep.cpp).
#pragma once

#include <vector>

#include "tensorplay/schedules/action.h"
#include "tensorplay/schedules/cost_model.h"

namespace tensorplay::schedules::detail {

class StepCosts {
 public:
  /// When every stage costs the same (a cost model of single values) one row serves all (stride
  /// 0): a few bytes that stay in cache, where thousands of ranks would each read their own line.
  /// `costs` must have passed CostModel::check(num_stages) (the simulator checks it first).
  StepCosts(const CostModel& costs, int num_stages) : costs_(costs), num_stages_(num_stages) {
    durations_.resize(static_cast<std::size_t>(num_stages) * kComputeKinds);
    transfer_.resize(static_cast<std::size_t>(num_stages));
    bool same = true;
    for (int stage = 0; stage < num_stages; ++stage) {
      for (int kind = 0; kind < kComputeKinds; ++kind) {
        double& d = durations_[stage * kComputeKinds + kind];
        d = costs.duration(Action{stage, static_cast<ActionKind>(kind), 0, {}});
        same = same && d == durations_[kind];
      }
      // The last stage sends nothing forward; its entry is never read.
      transfer_[stage] = stage + 1 < num_stages ? costs.transfer_time(stage) : 0.0;
      same = same && (stage + 1 == num_stages || transfer_[stage] == transfer_[0]);
    }
    duration_stride_ = same ? 0 : kComputeKinds;
    transfer_stride_ = same ? 0 : 1;
  }

  /// CostModel::duration, from the table for F, I, W and B.
  double duration(const Action& action) const {
    const int kind = static_cast<int>(action.kind);
    if (kind < kComputeKinds && action.stage >= 0 && action.stage < num_stages_) {
      return durations_[action.stage * duration_stride_ + kind];
    }
    return costs_.duration(action);
  }
  /// CostModel::transfer_time of the boundary after `stage`.
  double transfer_after(int stage) const { return transfer_[stage * transfer_stride_]; }

 private:
  static constexpr int kComputeKinds = 4;  // F, I, W and B: the kinds with a table
  const CostModel& costs_;
  int num_stages_;
  std::vector<double> durations_;        // [stage * kComputeKinds + kind]
  std::vector<double> transfer_;         // [stage]
  int duration_stride_ = kComputeKinds;  // 0: every stage's row is the first
  int transfer_stride_ = 1;              // 0: every boundary's time is the first
};

}  // namespace tensorplay::schedules::detail
