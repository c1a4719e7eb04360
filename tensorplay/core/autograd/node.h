// A node of the autograd graph: the backward function of one op, the edges to its inputs'
// producers, and the tensors it saved. Ops subclass Node; the engine walks the graph of Nodes.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "tensorplay/core/tensor.h"

namespace tensorplay::autograd {

class Node;

namespace detail {
/// What a checkpoint (tensorplay/core/autograd/checkpoint.h) leaves on the nodes of its forward,
/// whose saved tensors it dropped: run() recomputes that forward once and hands each of the nodes
/// its twin from the recomputation.
class PendingRecompute {
 public:
  virtual ~PendingRecompute() = default;
  virtual void run() = 0;
};
}  // namespace detail

/// Where an input's gradient goes: the node that produced it, or a leaf that accumulates it.
struct Edge {
  std::shared_ptr<Node> node;
  std::shared_ptr<TensorImpl> leaf;
  bool valid() const { return node != nullptr || leaf != nullptr; }
};

/// Backward function of one op with a single output.
class Node {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// Op name for messages ("LinearBackward").
  virtual const char* name() const = 0;
  /// Gradients with respect to each input, given the output's gradient. Entries whose `needed`
  /// flag is false may be left undefined. Each input's gradient must be computed the same way
  /// whatever the other flags are: that makes a split backward (I then W) equal a full one.
  virtual std::vector<Tensor> apply(const Tensor& grad_output, const std::vector<bool>& needed) = 0;
  /// Drops saved tensors once the graph is no longer needed.
  virtual void release() {}
  /// The saved tensors apply reads (pointers to members), so that they can be stored narrower
  /// between forward and backward. Nodes that save no inputs keep the default: none.
  virtual std::vector<Tensor*> saved_tensors() { return {}; }

  /// What the engine calls: apply, with the saved tensors that narrow_saved replaced widened back
  /// to float32 for the call (exactly: bfloat16 widens without rounding). A node whose forward
  /// ran under a checkpoint first has the checkpoint recompute it (once, for all of its nodes),
  /// then applies its recomputed twin, which holds the saved tensors.
  std::vector<Tensor> run(const Tensor& grad_output, const std::vector<bool>& needed);
  /// What the engine calls when it is done with a node: release(), and the recomputed twin.
  void release_all();
  /// For each (wide, narrow) pair, a saved tensor viewing `wide`'s memory with its shape is
  /// replaced by `narrow`, the bfloat16 tensor that `wide` was widened from; run widens it again.
  /// bfloat16 ops computed in float32 use this so they keep bfloat16 copies for the backward.
  void narrow_saved(const std::vector<std::pair<Tensor, Tensor>>& wide_to_narrow);

  /// One edge per input, in input order (invalid for inputs that need no gradient).
  std::vector<Edge> next_edges;
  /// Creation order; the engine runs later nodes first.
  uint64_t sequence_nr;

  /// Set by a checkpoint's forward, which released this node's saved tensors: the first run()
  /// recomputes that forward. Null otherwise.
  std::shared_ptr<detail::PendingRecompute> pending_recompute;
  /// Set by that recomputation: the same op from the recomputed forward, with its saved tensors;
  /// run() applies it in this node's place (this node keeps its edges and place in the graph).
  std::shared_ptr<Node> recomputed;

 private:
  std::vector<Tensor*> narrowed_;  // saved tensors held as bfloat16 until run
};

/// Whether `t` takes part in autograd (requires grad and grad mode is on).
bool needs_grad(const Tensor& t);

/// Attaches `node` as the grad_fn of `output`, with one edge per input, when any input needs a
/// gradient and grad mode is on. Returns `output`.
Tensor attach(Tensor output, std::shared_ptr<Node> node, const std::vector<Tensor>& inputs);

/// Whether any of `inputs` needs a gradient (so an op should build a node).
bool any_needs_grad(const std::vector<Tensor>& inputs);

namespace detail {
/// Called with every node that attach() attaches on this thread, and the output it is attached
/// to, while installed (a checkpoint's forward records the nodes it made). Returns the previous.
using AttachHook = void (*)(const std::shared_ptr<Node>& node, const Tensor& output);
AttachHook set_attach_hook(AttachHook hook);
}  // namespace detail

}  // namespace tensorplay::autograd
