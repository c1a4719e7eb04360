// The backward engine: full backward, and the split backward that zero-bubble schedules use
// (input gradients now, weight gradients later from a stash). I then W equals full bit for bit.
#pragma once

#include <memory>
#include <vector>

#include "tensorplay/core/tensor.h"

namespace tensorplay::autograd {

/// Full backward: accumulates gradients into every leaf that requires them.
/// `grads` gives the gradient of each root (omit for scalar roots: ones).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {},
              bool retain_graph = false);

/// What backward_input left for backward_weight: the nodes whose weight-side gradients are
/// still owed, with the output gradients they need.
class WeightGradStash {
 public:
  WeightGradStash();
  ~WeightGradStash();
  WeightGradStash(WeightGradStash&&) noexcept;
  WeightGradStash& operator=(WeightGradStash&&) noexcept;
  /// Number of nodes with pending weight gradients.
  size_t size() const;
  bool empty() const { return size() == 0; }

  struct Entry;
  std::vector<Entry>& entries();

 private:
  std::unique_ptr<std::vector<Entry>> entries_;
};

/// Input-only backward (I): accumulates gradients into `inputs` (leaves requiring grad, such as a
/// stage's received activations) and stashes what the remaining leaves (weights) need. A node
/// whose forward ran under a checkpoint computes its weight-side gradients here too and drops
/// what its recomputation saved, so the stash holds those gradients (about a parameter's size)
/// instead of the recomputed activations; without `all_weight_grads` no weight's .grad changes.
///
/// With `all_weight_grads`, every node computes its weight-side gradients here and each weight's
/// goes into its .grad at once, in W's order (a recomputing stage: no second copy of them is held
/// to I's end); the stash keeps only gradients bound for other nodes, which W adds.
WeightGradStash backward_input(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                               const std::vector<Tensor>& inputs, bool all_weight_grads = false);

/// Weight-only backward (W): consumes a stash from backward_input and accumulates the gradients
/// of every remaining leaf.
void backward_weight(WeightGradStash&& stash);

}  // namespace tensorplay::autograd
