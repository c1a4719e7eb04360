// Node bookkeeping: sequence numbers and attaching a node to an op's output.
#include "tensorplay/core/autograd/node.h"

#include <atomic>

#include "tensorplay/core/autograd/grad_mode.h"

namespace tensorplay::autograd {
namespace {
std::atomic<uint64_t> next_sequence_nr{0};
thread_local detail::AttachHook attach_hook = nullptr;
}  // namespace

detail::AttachHook detail::set_attach_hook(AttachHook hook) {
  AttachHook previous = attach_hook;
  attach_hook = hook;
  return previous;
}

Node::Node() : sequence_nr(next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

std::vector<Tensor> Node::run(const Tensor& grad_output, const std::vector<bool>& needed) {
  if (pending_recompute) {
    // Keeps the recomputation alive while it runs: it clears pending_recompute of its nodes.
    std::shared_ptr<detail::PendingRecompute> pending = pending_recompute;
    pending->run();
  }
  if (recomputed) return recomputed->run(grad_output, needed);
  if (narrowed_.empty()) return apply(grad_output, needed);
  std::vector<Tensor> narrow;
  narrow.reserve(narrowed_.size());
  for (Tensor* slot : narrowed_) narrow.push_back(*slot);
  auto restore = [&] {
    for (size_t i = 0; i < narrowed_.size(); ++i) *narrowed_[i] = narrow[i];
  };
  try {
    for (Tensor* slot : narrowed_)
      if (slot->defined()) *slot = slot->to(DType::Float32);
    std::vector<Tensor> grads = apply(grad_output, needed);
    restore();
    return grads;
  } catch (...) {
    restore();
    throw;
  }
}

void Node::release_all() {
  release();
  recomputed.reset();
  pending_recompute.reset();
}

void Node::narrow_saved(const std::vector<std::pair<Tensor, Tensor>>& wide_to_narrow) {
  for (Tensor* slot : saved_tensors()) {
    if (!slot->defined()) continue;
    for (const auto& [wide, narrow] : wide_to_narrow) {
      if (slot->shares_storage(wide) && slot->shape() == wide.shape()) {
        *slot = narrow.detach();
        narrowed_.push_back(slot);
        break;
      }
    }
  }
}

bool needs_grad(const Tensor& t) { return t.defined() && t.requires_grad() && grad_enabled(); }

bool any_needs_grad(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Tensor attach(Tensor output, std::shared_ptr<Node> node, const std::vector<Tensor>& inputs) {
  if (!any_needs_grad(inputs)) return output;
  node->next_edges.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    if (!in.defined() || !in.requires_grad()) continue;
    if (in.grad_fn()) {
      node->next_edges[i].node = in.grad_fn();
    } else {
      node->next_edges[i].leaf = in.impl_ptr();
    }
  }
  output.impl().requires_grad = true;
  output.impl().grad_fn = std::move(node);
  if (attach_hook) attach_hook(output.impl().grad_fn, output);
  return output;
}

}  // namespace tensorplay::autograd
