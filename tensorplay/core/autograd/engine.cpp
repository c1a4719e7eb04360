// The backward engine. Nodes run in decreasing creation order once all their consumers have
// contributed, as in PyTorch. The split backward follows only edges that lead to the requested
// inputs (I) and stashes the other edges of those nodes for later (W); because every node computes
// each input's gradient independently, and leaves accumulate in the same order, I then W gives
// the same bits as a full backward.
#include "tensorplay/core/autograd/engine.h"

#include <functional>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/backend.h"
#include "tensorplay/core/memory_accounting.h"
#include "tensorplay/core/tensor_memory.h"

namespace tensorplay::autograd {

struct WeightGradStash::Entry {
  std::shared_ptr<Node> node;
  Tensor grad_output;
  std::vector<bool> needed;
  /// The weight-side gradients when I computed them already (a recomputed node, whose saved
  /// tensors I then released), and the edges they go along: W accumulates these instead of
  /// running the node, which the entry then no longer holds (nor the graph behind it).
  std::vector<Tensor> computed;
  std::vector<Edge> edges;
  bool is_computed = false;
};

WeightGradStash::WeightGradStash() : entries_(std::make_unique<std::vector<Entry>>()) {}
WeightGradStash::~WeightGradStash() = default;
WeightGradStash::WeightGradStash(WeightGradStash&&) noexcept = default;
WeightGradStash& WeightGradStash::operator=(WeightGradStash&&) noexcept = default;
size_t WeightGradStash::size() const { return entries_ ? entries_->size() : 0; }
std::vector<WeightGradStash::Entry>& WeightGradStash::entries() { return *entries_; }

namespace {

// out = a + b for tensors of one shape and dtype (out may be a). bfloat16 adds in float32 and
// rounds once, as the bfloat16 ops do.
void add_into(Tensor out, const Tensor& a, const Tensor& b) {
  if (out.dtype() != DType::Float32) {
    Tensor wide = empty(out.shape(), {.device = out.device()});
    add_into(wide, a.detach().to(DType::Float32), b.detach().to(DType::Float32));
    out.copy_(wide);
    return;
  }
  int64_t n = out.numel();
  int64_t stride = 1;
  backend_for(out.device())
      .binary(BinaryOp::Add, a.data<float>(), &stride, b.data<float>(), &stride, out.data<float>(),
              &n, 1);
}

// The first gradient of a leaf becomes its .grad as it is: taken over when nothing else can see
// it (`owned`: the engine holds the only reference to a tensor that is the only user of its
// storage), copied otherwise. Later gradients are added. Either way the first .grad equals g
// exactly, so full and split backward agree bit for bit.
void accumulate_into(TensorImpl& leaf, const Tensor& g, bool owned);

// Accumulates, then runs the leaf's post-accumulate hooks (register_post_accumulate_grad_hook).
void accumulate_into_leaf(const std::shared_ptr<TensorImpl>& leaf, const Tensor& g,
                          bool owned = false) {
  accumulate_into(*leaf, g, owned);
  if (leaf->post_accumulate_hooks.empty()) return;
  const Tensor handle(leaf);
  for (const auto& [id, hook] : leaf->post_accumulate_hooks) hook(handle);
}

void accumulate_into(TensorImpl& leaf, const Tensor& g, bool owned) {
  if (g.shape() != leaf.shape) {
    throw std::logic_error("autograd: gradient of shape " + to_string(g.shape()) +
                           " for a leaf of shape " + to_string(leaf.shape));
  }
  Device device = leaf.storage->device();
  if (!leaf.grad && owned && g.dtype() == leaf.dtype && g.device() == device &&
      g.impl_ptr().use_count() == 1 && g.impl().storage.use_count() == 1 && g.impl().offset == 0 &&
      !g.requires_grad()) {
    leaf.grad = g.impl_ptr();
    mark_gradient_memory(g);  // a stage's gradient bytes, not its activations
    return;
  }
  Tensor src = g.dtype() == leaf.dtype ? g : g.to(leaf.dtype);
  if (!leaf.grad) {
    Tensor fresh = empty(leaf.shape, {.dtype = leaf.dtype, .device = device});
    backend_for(device.is_cuda() ? device : src.device())
        .copy(fresh.raw_data(), device, src.raw_data(), src.device(), src.nbytes());
    leaf.grad = fresh.impl_ptr();
    mark_gradient_memory(fresh);
    return;
  }
  Tensor acc(leaf.grad);
  add_into(acc, acc, src);
}

// Whether nothing but the engine's one handle sees `t` or its memory, so it may be overwritten.
bool engine_owned(const Tensor& t) {
  return t.impl_ptr().use_count() == 1 && t.impl().storage.use_count() == 1 && !t.requires_grad();
}

// a + b. The sum goes into `a` when the engine alone holds it (the same bits, without a new
// buffer per accumulation); `a` is the engine's running sum for one node's output.
Tensor add_grads(Tensor a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  const Tensor wide_b = b.dtype() == a.dtype() ? b : b.detach().to(a.dtype());
  Tensor out = engine_owned(a) ? a : empty_like(a);
  add_into(out, a, wide_b);
  return out;
}

/// Decides, per node and edge, whether this pass follows the edge now.
using EdgeFilter = std::function<bool(Node*, size_t)>;
/// Runs after a node's apply with its output gradient and the gradients it computed (by edge;
/// those of edges the pass does not follow may be taken).
using NodeHook =
    std::function<void(const std::shared_ptr<Node>&, const Tensor&, std::vector<Tensor>&)>;

/// Whether a pass computes every gradient of `n` at once, also along edges it does not follow
/// (null: only along followed edges).
using WholeNode = std::function<bool(Node*)>;

struct NodeState {
  int dependencies = 0;
  Tensor grad;
};

struct ByLaterSequence {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// Finds the nodes a pass from `seeds` visits (owned in `owners`) and counts each one's
// consumers in `states`.
void discover(const std::vector<std::pair<Edge, Tensor>>& seeds, const EdgeFilter& follow,
              std::unordered_map<Node*, NodeState>& states,
              std::unordered_map<Node*, std::shared_ptr<Node>>& owners) {
  std::vector<Node*> stack;
  for (auto& [edge, grad] : seeds) {
    if (edge.node && !owners.count(edge.node.get())) {
      owners[edge.node.get()] = edge.node;
      states[edge.node.get()];
      stack.push_back(edge.node.get());
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.node || !follow(n, i)) continue;
      NodeState& s = states[e.node.get()];
      // First time this node is reached (seeds are owned and queued already): walk it.
      if (s.dependencies++ == 0 && owners.emplace(e.node.get(), e.node).second) {
        stack.push_back(e.node.get());
      }
    }
  }
}

/// One pass over the graph from seed gradients. `on_node` runs after a node's apply (for
/// stashing); `release` says whether to drop a node's saved tensors when done; `whole` which
/// nodes compute the gradients of the edges not followed too (handed to on_node).
void execute(std::vector<std::pair<Edge, Tensor>> seeds, const EdgeFilter& follow,
             const NodeHook& on_node, const std::function<bool(Node*)>& release,
             const WholeNode& whole = nullptr) {
  std::unordered_map<Node*, NodeState> states;
  std::unordered_map<Node*, std::shared_ptr<Node>> owners;
  discover(seeds, follow, states, owners);
  std::priority_queue<Node*, std::vector<Node*>, ByLaterSequence> ready;
  for (auto& [edge, grad] : seeds) {
    if (edge.leaf) {
      if (grad.defined()) accumulate_into_leaf(edge.leaf, grad);
      continue;
    }
    if (!edge.node) continue;
    NodeState& s = states[edge.node.get()];
    s.grad = add_grads(std::move(s.grad), grad);
  }
  std::unordered_set<Node*> queued;
  for (auto& [edge, grad] : seeds) {
    if (edge.node && states[edge.node.get()].dependencies == 0 &&
        queued.insert(edge.node.get()).second) {
      ready.push(edge.node.get());
    }
  }
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::shared_ptr<Node> owner = owners[n];
    Tensor grad = std::move(states[n].grad);
    std::vector<bool> needed(n->next_edges.size()), followed(n->next_edges.size());
    const bool all = whole && whole(n);
    bool any = false;
    for (size_t i = 0; i < needed.size(); ++i) {
      followed[i] = n->next_edges[i].valid() && follow(n, i);
      needed[i] = followed[i] || (all && n->next_edges[i].valid());
      any = any || followed[i];
    }
    std::vector<Tensor> input_grads;
    if (grad.defined() && any) input_grads = n->run(grad, needed);
    if (on_node && grad.defined()) on_node(owner, grad, input_grads);
    for (size_t i = 0; i < needed.size(); ++i) {
      if (!followed[i]) continue;
      const Edge& e = n->next_edges[i];
      Tensor g = i < input_grads.size() ? std::move(input_grads[i]) : Tensor();
      if (e.leaf) {
        if (g.defined()) accumulate_into_leaf(e.leaf, g, /*owned=*/true);
        continue;
      }
      NodeState& s = states[e.node.get()];
      s.grad = add_grads(std::move(s.grad), g);
      if (--s.dependencies == 0) ready.push(e.node.get());
    }
    if (release(n)) n->release_all();
  }
}

std::vector<std::pair<Edge, Tensor>> root_seeds(const std::vector<Tensor>& roots,
                                                const std::vector<Tensor>& grads) {
  if (!grads.empty() && grads.size() != roots.size())
    throw std::invalid_argument("backward: " + std::to_string(grads.size()) +
                                " gradients given for " + std::to_string(roots.size()) + " roots");
  std::vector<std::pair<Edge, Tensor>> seeds;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    if (!r.requires_grad())
      throw std::invalid_argument(
          "backward: tensor " + std::to_string(i) +
          " does not require grad and has no grad_fn (was it computed under NoGradGuard, or from "
          "tensors that do not require grad?)");
    Tensor g;
    if (grads.empty() || !grads[i].defined()) {
      if (r.numel() != 1)
        throw std::invalid_argument(
            "backward: gradient can be implicit only for scalar outputs; "
            "got shape " +
            to_string(r.shape()) + ", pass its gradient");
      g = ones(r.shape(), {.dtype = r.dtype(), .device = r.device()});
    } else {
      g = grads[i];
      if (g.shape() != r.shape())
        throw std::invalid_argument("backward: gradient shape " + to_string(g.shape()) +
                                    " does not match output shape " + to_string(r.shape()));
      if (g.dtype() != r.dtype()) g = g.detach().to(r.dtype());
    }
    Edge e;
    if (r.grad_fn())
      e.node = r.grad_fn();
    else
      e.leaf = r.impl_ptr();
    seeds.emplace_back(std::move(e), std::move(g));
  }
  return seeds;
}

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
              bool retain_graph) {
  execute(
      root_seeds(roots, grads), [](Node*, size_t) { return true; }, nullptr,
      [retain_graph](Node*) { return !retain_graph; });
}

namespace {

// A node whose forward ran under a checkpoint. I computes its weight-side gradients at once and
// releases it: what its recomputation saved goes when I is done with it, instead of living until
// W, and W only accumulates what I computed (in W's order, so the bits stay the same).
bool recomputes(Node* n) { return n->pending_recompute != nullptr || n->recomputed != nullptr; }

// I's pass from `seeds` along edges that reach the inputs; stashes the weight-side work.
//
// With `all_weight_grads`, a weight's gradient goes into its .grad as soon as its node has
// computed it, instead of waiting in the stash until the pass ends: the stash would otherwise
// hold a second copy of the parameters' gradients at the end of I. The leaves then accumulate in
// the stash's order, as backward_weight would add them, so the bits stay the same; only when
// the stash holds nothing yet (roots reaching no input run first in backward_weight).
void run_input_pass(std::vector<std::pair<Edge, Tensor>> seeds, const EdgeFilter& edge_reaches,
                    bool all_weight_grads, WeightGradStash& stash) {
  auto at_once = [all_weight_grads](Node* n) { return all_weight_grads || recomputes(n); };
  const bool leaves_at_once = all_weight_grads && stash.empty();
  std::unordered_set<Node*> has_weight_work;
  execute(
      std::move(seeds), edge_reaches,
      [&](const std::shared_ptr<Node>& n, const Tensor& grad, std::vector<Tensor>& computed) {
        std::vector<bool> needed(n->next_edges.size());
        bool any = false;
        for (size_t i = 0; i < needed.size(); ++i) {
          needed[i] = n->next_edges[i].valid() && !edge_reaches(n.get(), i);
          any = any || needed[i];
        }
        if (!any) return;
        WeightGradStash::Entry entry{n, grad, std::move(needed), {}, {}, false};
        if (at_once(n.get())) {
          entry.node = nullptr;
          entry.grad_output = Tensor();
          entry.is_computed = true;
          entry.computed.resize(entry.needed.size());
          entry.edges.resize(entry.needed.size());
          bool owed = false;  // a gradient left for backward_weight
          for (size_t i = 0; i < entry.needed.size(); ++i) {
            if (!entry.needed[i]) continue;
            const Edge& edge = n->next_edges[i];
            Tensor g = i < computed.size() ? std::move(computed[i]) : Tensor();
            if (leaves_at_once && edge.leaf) {
              if (g.defined()) accumulate_into_leaf(edge.leaf, g, /*owned=*/true);
              entry.needed[i] = false;
              continue;
            }
            entry.edges[i] = edge;
            entry.computed[i] = std::move(g);
            owed = true;
          }
          if (!owed) return;
        } else {
          has_weight_work.insert(n.get());
        }
        stash.entries().push_back(std::move(entry));
      },
      [&](Node* n) { return !has_weight_work.count(n); }, at_once);
}

}  // namespace

WeightGradStash backward_input(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                               const std::vector<Tensor>& inputs, bool all_weight_grads) {
  std::unordered_set<const TensorImpl*> targets;
  for (const Tensor& t : inputs) {
    if (!t.is_leaf() || !t.requires_grad())
      throw std::invalid_argument(
          "backward_input: inputs must be leaves that require grad (detached stage inputs)");
    targets.insert(t.impl_ptr().get());
  }
  // reaches[n]: some path from n leads to one of the inputs.
  std::unordered_map<Node*, bool> reaches;
  std::function<bool(Node*)> reach = [&](Node* n) -> bool {
    auto it = reaches.find(n);
    if (it != reaches.end()) return it->second;
    reaches[n] = false;
    bool r = false;
    for (const Edge& e : n->next_edges) {
      if (e.leaf && targets.count(e.leaf.get())) r = true;
      if (e.node && reach(e.node.get())) r = true;
    }
    reaches[n] = r;
    return r;
  };
  auto edge_reaches = [&](Node* n, size_t i) {
    const Edge& e = n->next_edges[i];
    return (e.leaf && targets.count(e.leaf.get())) || (e.node && reach(e.node.get()));
  };
  WeightGradStash stash;
  auto seeds = root_seeds(roots, grads);
  // Roots that reach no input are weight work in full: stash them as they are.
  std::vector<std::pair<Edge, Tensor>> input_seeds;
  for (auto& [edge, grad] : seeds) {
    if (edge.leaf) {
      if (targets.count(edge.leaf.get())) input_seeds.emplace_back(edge, grad);
      continue;
    }
    if (reach(edge.node.get())) {
      input_seeds.emplace_back(edge, grad);
    } else {
      std::vector<bool> needed(edge.node->next_edges.size());
      for (size_t i = 0; i < needed.size(); ++i) needed[i] = edge.node->next_edges[i].valid();
      stash.entries().push_back({edge.node, grad, std::move(needed), {}, {}, false});
    }
  }
  run_input_pass(std::move(input_seeds), edge_reaches, all_weight_grads, stash);
  return stash;
}

void backward_weight(WeightGradStash&& stash) {
  std::vector<std::pair<Edge, Tensor>> seeds;
  for (auto& entry : stash.entries()) {
    std::vector<Tensor> grads = entry.is_computed
                                    ? std::move(entry.computed)
                                    : entry.node->run(entry.grad_output, entry.needed);
    for (size_t i = 0; i < entry.needed.size(); ++i) {
      if (!entry.needed[i] || i >= grads.size() || !grads[i].defined()) continue;
      const Edge& edge = entry.is_computed ? entry.edges[i] : entry.node->next_edges[i];
      // A weight's gradient was just computed here and nothing else sees it: it becomes .grad
      // as it is (as in a full backward) instead of being copied.
      if (edge.leaf) {
        accumulate_into_leaf(edge.leaf, grads[i], /*owned=*/true);
        continue;
      }
      seeds.emplace_back(edge, std::move(grads[i]));
    }
    if (entry.node) entry.node->release_all();
  }
  stash.entries().clear();
  execute(
      std::move(seeds), [](Node*, size_t) { return true; }, nullptr, [](Node*) { return true; });
}

}  // namespace tensorplay::autograd

namespace tensorplay {

// Tensor's method that is the engine.
void Tensor::backward(const Tensor& grad) const {
  autograd::backward({*this}, grad.defined() ? std::vector<Tensor>{grad} : std::vector<Tensor>{});
}

}  // namespace tensorplay
