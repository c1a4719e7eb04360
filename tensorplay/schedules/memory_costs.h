// The simulator's memory model inputs: what one microbatch's forward keeps on each stage (with
// and without recomputation), what the split backward keeps for W, and each stage's fixed bytes.
#pragma once

#include <vector>

namespace tensorplay::schedules {

/// Bytes per stage (index = stage, or one value for every stage). All zero: no memory model.
struct MemoryCosts {
  /// Activation bytes one microbatch's F stashes on the stage, held until its B (or its I and W).
  std::vector<double> activation_bytes = {0.0};
  /// What F keeps under recomputation (the checkpointed modules' inputs); the rest is rebuilt at
  /// B or I and held while it runs.
  std::vector<double> recompute_activation_bytes = {0.0};
  /// What I keeps for W (held from the end of I to the end of W).
  std::vector<double> weight_stash_bytes = {0.0};
  /// Bytes held only while one of the stage's actions runs (workspaces, gradients on their way).
  std::vector<double> transient_bytes = {0.0};
  /// Bytes an F keeps until the step ends (the last stage's outputs, which the step returns).
  std::vector<double> retained_bytes = {0.0};
  /// Bytes of the stage's outputs on their way to the next stage: held by the stage from its F
  /// until the next stage's F takes them (that stage's activation_bytes count them from then on).
  std::vector<double> sent_bytes = {0.0};
  /// Parameters, gradients and optimizer state: held all step.
  std::vector<double> fixed_bytes = {0.0};
  /// 1: the stage recomputes (its F keeps recompute_activation_bytes), 0: it does not.
  std::vector<int> recompute = {0};

  /// True when every byte figure is zero (the simulator then predicts no bytes).
  bool empty() const;
  /// Bytes an F of `stage` keeps until its backward: recompute_activation_bytes when the stage
  /// recomputes, else activation_bytes.
  double kept(int stage) const;
  /// The value of `values` for `stage` (a single value is every stage's).
  static double of(const std::vector<double>& values, int stage);
  /// Each stage's kept() for `num_stages` stages (what a byte cap counts).
  std::vector<double> kept_per_stage(int num_stages) const;
  /// Throws std::invalid_argument naming the field when a list is empty, negative, or shorter
  /// than `num_stages` without being a single value.
  void check(int num_stages) const;
};

}  // namespace tensorplay::schedules
