// The dynamic policy's byte cap: activation bytes a rank holds and has reserved for microbatches
// already admitted, and whether a new microbatch fits under max_activation_bytes.
#pragma once

#include <string>
#include <vector>

#include "tensorplay/schedules/action.h"
#include "tensorplay/schedules/policy.h"

namespace tensorplay::schedules::detail {

/// Counts one rank's activation bytes against DynamicPolicyOptions::max_activation_bytes.
class ActivationBudget {
 public:
  ActivationBudget() = default;
  /// Checks the options against `local_stages` (first_stage is where microbatches enter the
  /// rank): throws std::invalid_argument when the cap is negative, given without
  /// activation_bytes, or below least_cap(): one microbatch's kept and sent bytes over the local
  /// stages plus the largest workspace of one of them.
  ActivationBudget(const std::vector<int>& local_stages, int first_stage,
                   const DynamicPolicyOptions& options);

  bool capped() const { return cap_ > 0; }
  /// The least cap this rank can honour: what one microbatch needs at its peak.
  double least_cap() const;
  /// Whether a forward of `stage` may start: always, except a new microbatch on the first local
  /// stage, which must fit with everything held and reserved.
  bool admits(int stage) const;
  /// A forward of `stage` started: its bytes are held (and, on the first stage, the rest of the
  /// microbatch's reserved).
  void started_forward(int stage);
  /// `action` ended: its B or W (an OVERLAP_F_B's included) frees what the forward kept.
  void completed(const Action& action);
  void reset();
  /// "activation byte cap C reached (H held, R reserved, N per microbatch, W of workspace)".
  std::string describe() const;

 private:
  static double value_of(const std::vector<double>& values, int stage);
  /// What a microbatch holds on `stage` until its backward: kept plus sent bytes.
  double bytes_of(int stage) const;

  double cap_ = 0;
  std::vector<double> bytes_;
  std::vector<double> sent_;
  std::vector<double> workspace_;
  double largest_workspace_ = 0;
  int first_stage_ = 0;
  double per_microbatch_ = 0;
  double held_ = 0;
  double reserved_ = 0;
};

}  // namespace tensorplay::schedules::detail
