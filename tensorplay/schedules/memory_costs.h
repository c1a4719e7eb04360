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
  /// Bytes held only while one of the stage's actions runs (workspaces, gradients on their way):
  /// every action's, where the per-action figures below are not given.
  std::vector<double> transient_bytes = {0.0};
  /// Held only while the stage's F runs (dropout masks and workspaces freed by its end); empty:
  /// transient_bytes.
  std::vector<double> forward_transient_bytes;
  /// Held only while the stage's I runs (its workspace, the input gradients on their way, the
  /// rebuilt activations of a recomputing stage); empty: transient_bytes.
  std::vector<double> input_transient_bytes;
  /// Held only while the stage's W runs; empty: transient_bytes.
  std::vector<double> weight_transient_bytes;
  /// Held only while the stage's full backward B runs; empty: the larger of I's and W's.
  std::vector<double> full_backward_transient_bytes;
  /// Bytes an F keeps until the step ends (the last stage's outputs, which the step returns).
  std::vector<double> retained_bytes = {0.0};
  /// Bytes of the stage's outputs on their way to the next stage: held by the stage from its F
  /// until the next stage's F takes them (that stage's activation_bytes count them from then on).
  std::vector<double> sent_bytes = {0.0};
  /// Parameters, gradients and optimizer state: held all step.
  std::vector<double> fixed_bytes = {0.0};
  /// A stage sharded over its dp group (fixed_bytes: its shards): what it holds from its UNSHARD
  /// to its RESHARD beyond them (the gathered parameters, and the unsharded gradients they
  /// accumulate). Empty: none.
  std::vector<double> gathered_bytes;
  /// 1: the stage recomputes (its F keeps recompute_activation_bytes), 0: it does not.
  std::vector<int> recompute = {0};
  /// Held only while a recomputing stage's F runs, its segments' activations (built, then let
  /// go) included; empty: forward_transient. An F that keeps its activations holds
  /// forward_transient.
  std::vector<double> recompute_forward_transient_bytes;
  /// Held only while a recomputing stage's I runs, the activations it rebuilds included; empty:
  /// input_transient plus activation_bytes. An I after an F that kept its activations holds
  /// input_transient.
  std::vector<double> recompute_input_transient_bytes;
  /// The same for a recomputing stage's full backward B; empty: full_backward_transient plus
  /// activation_bytes.
  std::vector<double> recompute_full_backward_transient_bytes;
  /// What a recomputing stage's I that rebuilt the activations keeps for W (it computes most
  /// weight gradients within its pass); empty: weight_stash_bytes. An I after an F that kept its
  /// activations runs as a plain stage's and keeps weight_stash_bytes.
  std::vector<double> recompute_weight_stash_bytes;
  /// 1: an F of a recomputing stage right before its own backward keeps its activations (a stage
  /// of one recomputed segment, as the runtime runs it); 0: it recomputes anyway (several
  /// segments, which its backward rebuilds one at a time). Empty: 1 for every stage.
  std::vector<int> keep_before_backward;

  /// True when every byte figure is zero (the simulator then predicts no bytes).
  bool empty() const;
  /// Bytes an F of `stage` keeps until its backward: recompute_activation_bytes when the stage
  /// recomputes, else activation_bytes.
  double kept(int stage) const;
  /// The value of `values` for `stage` (a single value is every stage's).
  static double of(const std::vector<double>& values, int stage);
  /// Each stage's kept() for `num_stages` stages (what a byte cap counts).
  std::vector<double> kept_per_stage(int num_stages) const;
  /// Whether `stage` recomputes (its F keeps recompute_activation_bytes).
  bool recomputes(int stage) const;
  /// Transient bytes of the stage's F, I, W and B (the per-action figure, else transient_bytes).
  double forward_transient(int stage) const;
  double input_transient(int stage) const;
  double weight_transient(int stage) const;
  double full_backward_transient(int stage) const;
  /// Transient bytes of a recomputing stage's F that does not keep its activations.
  double recomputing_forward_transient(int stage) const;
  /// Transient bytes of a recomputing stage's I that rebuilds the activations.
  double rebuilding_input_transient(int stage) const;
  /// Transient bytes of a recomputing stage's B that rebuilds the activations.
  double rebuilding_full_backward_transient(int stage) const;
  /// What a recomputing stage's I that rebuilt the activations keeps for W.
  double rebuilding_weight_stash(int stage) const;
  /// Whether an F of `stage` right before its own backward keeps its activations.
  bool keeps_before_backward(int stage) const;
  /// The most any action of each stage holds while it runs beyond what it keeps: the largest of
  /// its transients, plus the rebuilt activations on a recomputing stage (what a byte cap
  /// reserves for the running action).
  std::vector<double> workspace_per_stage(int num_stages) const;
  /// Each stage's sent_bytes (the last stage sends nothing).
  std::vector<double> sent_per_stage(int num_stages) const;
  /// Throws std::invalid_argument naming the field when a list is empty, negative, or shorter
  /// than `num_stages` without being a single value.
  void check(int num_stages) const;
};

}  // namespace tensorplay::schedules
