// Checkpoints: the forward records the nodes it attached (and the nested checkpoints it ran) and
// the generators it drew from, then releases the nodes' saved tensors. The first node the backward
// runs has the forward recomputed on a fresh graph; node k of the recomputation becomes the twin
// that node k of the forward runs in its place, so the original graph, its edges and its order
// stay as they were.
#include "tensorplay/core/autograd/checkpoint.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>

#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/random.h"
#include "tensorplay/core/trace_hook.h"

namespace tensorplay::autograd {
namespace {

class Recomputation;

/// What a forward made, in order: a node (with the op and the output it was attached to), or a
/// nested checkpoint.
struct Made {
  std::shared_ptr<Node> node;
  std::shared_ptr<Recomputation> nested;
  std::string op;
  Shape shape;
  DType dtype = DType::Float32;
};

/// Each lock of a generator to draw, in order, with the state the draws under it started from.
using Draws = std::vector<std::pair<Generator*, std::mt19937_64>>;

/// One forward being recorded on this thread: a checkpoint's (owner set) or a recomputation's.
struct Recording {
  std::shared_ptr<Recomputation> owner;
  std::vector<Made> made;
  Draws draws;
};

/// A recomputation replaying its forward's draws on private engines, one lock after the other.
struct Replay {
  const Draws* draws = nullptr;
  size_t next = 0;
  std::vector<std::pair<Generator*, std::unique_ptr<std::mt19937_64>>> engines;
};

thread_local std::vector<Recording*> recordings;
thread_local bool keeping_activations = false;
thread_local Replay* replaying = nullptr;

void on_attach(const std::shared_ptr<Node>& node, const Tensor& output) {
  recordings.back()->made.push_back({node, nullptr, node->name(), output.shape(), output.dtype()});
}

// Called with the generator's lock held, so its engine can be read.
std::mt19937_64* on_draw(Generator& generator) {
  std::mt19937_64* engine = nullptr;
  if (replaying) {
    Replay& r = *replaying;
    if (r.next >= r.draws->size() || (*r.draws)[r.next].first != &generator)
      throw RecomputationError(
          "checkpoint: the recomputation drew random numbers from another generator, or more "
          "often, than the forward (its draw " +
          std::to_string(r.next) + " of " + std::to_string(r.draws->size()) +
          "). A checkpointed function must run the same ops on the same shapes when recomputed");
    auto it = std::find_if(r.engines.begin(), r.engines.end(),
                           [&](const auto& e) { return e.first == &generator; });
    if (it == r.engines.end())
      it = r.engines.insert(r.engines.end(), {&generator, std::make_unique<std::mt19937_64>()});
    *it->second = (*r.draws)[r.next++].second;
    engine = it->second.get();
  }
  const std::mt19937_64& state = engine ? *engine : generator.engine();
  for (Recording* r : recordings)
    if (r->owner) r->draws.emplace_back(&generator, state);
  return engine;
}

/// Records on this thread for its lifetime.
class RecordingScope {
 public:
  explicit RecordingScope(Recording& r) {
    recordings.push_back(&r);
    previous_attach_ = detail::set_attach_hook(on_attach);
    previous_draw_ = tensorplay::detail::set_draw_hook(on_draw);
  }
  ~RecordingScope() {
    recordings.pop_back();
    detail::set_attach_hook(recordings.empty() ? previous_attach_ : on_attach);
    tensorplay::detail::set_draw_hook(recordings.empty() ? previous_draw_ : on_draw);
  }
  RecordingScope(const RecordingScope&) = delete;
  RecordingScope& operator=(const RecordingScope&) = delete;

 private:
  detail::AttachHook previous_attach_;
  tensorplay::detail::DrawHook previous_draw_;
};

/// Grad mode on, no trace recorder, for a recomputation's lifetime.
class RecomputeModeScope {
 public:
  RecomputeModeScope() : grad_(grad_enabled()), recorder_(trace::set_active_recorder(nullptr)) {
    set_grad_enabled(true);
  }
  ~RecomputeModeScope() {
    set_grad_enabled(grad_);
    trace::set_active_recorder(recorder_);
  }
  RecomputeModeScope(const RecomputeModeScope&) = delete;
  RecomputeModeScope& operator=(const RecomputeModeScope&) = delete;

 private:
  bool grad_;
  trace::OpRecorder* recorder_;
};

/// Replays `draws` on this thread for its lifetime.
class ReplayScope {
 public:
  explicit ReplayScope(const Draws& draws) : previous_(replaying) {
    replay_.draws = &draws;
    replaying = &replay_;
  }
  ~ReplayScope() {
    replaying = previous_;
    // Forget the private engines this replay substituted: they die with it.
    tensorplay::detail::set_draw_hook(tensorplay::detail::set_draw_hook(nullptr));
  }
  ReplayScope(const ReplayScope&) = delete;
  ReplayScope& operator=(const ReplayScope&) = delete;
  /// Throws unless the recomputation drew as often as the forward.
  void check_all_drawn() const {
    if (replay_.next != replay_.draws->size())
      throw RecomputationError("checkpoint: the recomputation drew random numbers " +
                               std::to_string(replay_.next) + " times, the forward " +
                               std::to_string(replay_.draws->size()) +
                               ". A checkpointed function must run the same ops on the same "
                               "shapes when recomputed");
  }

 private:
  Replay replay_;
  Replay* previous_;
};

std::string describe(const std::string& op, const Shape& shape, DType dtype) {
  std::string name = op;
  const std::string suffix = "Backward";
  if (name.size() > suffix.size() && name.ends_with(suffix))
    name.resize(name.size() - suffix.size());
  return name + " -> " + to_string(shape) + " " + to_string(dtype);
}

const char* const kDeterminism =
    ". A checkpointed function must run the same ops on the same shapes when the backward "
    "recomputes it: do not branch on tensor values or on state that changes between the forward "
    "and the backward (a counter, a flag, the training mode), or do not checkpoint it";

/// What a checkpoint leaves for its backward.
class Recomputation final : public detail::PendingRecompute {
 public:
  /// A forward slot: a node or a nested checkpoint, held weakly (the graph owns them).
  struct Slot {
    std::weak_ptr<Node> node;
    std::weak_ptr<Recomputation> nested;
    bool is_nested = false;
    std::string op;
    Shape shape;
    DType dtype = DType::Float32;
  };

  CheckpointFn fn;
  std::vector<Tensor> inputs;  // detached; dropped while an enclosing checkpoint holds them
  std::vector<bool> input_requires_grad;
  bool inputs_dropped = false;
  /// The checkpoint whose forward ran this one; its recomputation gives back dropped inputs.
  std::shared_ptr<Recomputation> parent;
  std::vector<Slot> slots;
  Draws draws;
  std::vector<std::pair<Shape, DType>> outputs;
  bool done = false;
  bool running = false;

  void drop_inputs() {
    for (Tensor& t : inputs) t = Tensor();
    inputs_dropped = true;
  }

  void run() override {
    if (done) return;
    if (running)
      throw RecomputationError(
          "checkpoint: the backward reached an op of a checkpointed function while that function "
          "was being recomputed (did the function run a backward through its own outputs?)");
    if (inputs_dropped) {
      if (!parent)
        throw RecomputationError(
            "checkpoint: a nested checkpoint lost its inputs and has no enclosing checkpoint to "
            "recompute them");
      std::shared_ptr<Recomputation> keep = parent;
      keep->run();
      if (inputs_dropped)
        throw RecomputationError(
            "checkpoint: the enclosing checkpoint's recomputation did not run this nested "
            "checkpoint again" +
            std::string(kDeterminism));
    }
    running = true;
    struct Unmark {
      bool& flag;
      ~Unmark() { flag = false; }
    } unmark{running};

    std::vector<Tensor> in;
    in.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor t = inputs[i].defined() ? inputs[i].detach() : Tensor();
      if (t.defined() && input_requires_grad[i]) t.set_requires_grad(true);
      in.push_back(t);
    }
    Recording rec;
    std::vector<Tensor> out;
    {
      RecomputeModeScope mode;
      RecordingScope scope(rec);
      ReplayScope replay(draws);
      out = fn(in);
      check(rec, out);
      replay.check_all_drawn();
    }
    for (size_t i = 0; i < slots.size(); ++i) {
      Made& twin = rec.made[i];
      if (!slots[i].is_nested) {
        std::shared_ptr<Node> node = slots[i].node.lock();
        if (!node) continue;            // already run and released, or its graph is gone
        twin.node->next_edges.clear();  // the twin only applies; the original routes
        node->recomputed = twin.node;
        node->pending_recompute.reset();
      } else if (std::shared_ptr<Recomputation> nested = slots[i].nested.lock()) {
        nested->inputs = twin.nested->inputs;
        nested->inputs_dropped = false;
        nested->parent.reset();
      }
    }
    done = true;
    fn = nullptr;
    inputs.clear();
    parent.reset();
  }

 private:
  void check(const Recording& rec, const std::vector<Tensor>& out) const {
    const size_t common = std::min(slots.size(), rec.made.size());
    for (size_t i = 0; i < common; ++i) {
      const Slot& was = slots[i];
      const Made& now = rec.made[i];
      const bool same = was.is_nested ? now.nested != nullptr
                                      : now.node && now.op == was.op && now.shape == was.shape &&
                                            now.dtype == was.dtype;
      if (same) continue;
      auto text = [](bool nested, const std::string& op, const Shape& s, DType d) {
        return nested ? std::string("a nested checkpoint") : describe(op, s, d);
      };
      throw RecomputationError(
          "checkpoint: the recomputation differs from the forward at op " + std::to_string(i) +
          ": the forward ran " + text(was.is_nested, was.op, was.shape, was.dtype) +
          ", the recomputation " + text(now.nested != nullptr, now.op, now.shape, now.dtype) +
          kDeterminism);
    }
    if (slots.size() != rec.made.size())
      throw RecomputationError("checkpoint: the forward ran " + std::to_string(slots.size()) +
                               " op(s) that record gradients, the recomputation " +
                               std::to_string(rec.made.size()) + " (it took another branch)" +
                               kDeterminism);
    if (out.size() != outputs.size())
      throw RecomputationError("checkpoint: the function returned " +
                               std::to_string(outputs.size()) + " tensors in the forward and " +
                               std::to_string(out.size()) + " when recomputed" + kDeterminism);
    for (size_t i = 0; i < out.size(); ++i) {
      Shape shape = out[i].defined() ? out[i].shape() : Shape{};
      DType dtype = out[i].defined() ? out[i].dtype() : DType::Float32;
      if (shape != outputs[i].first || dtype != outputs[i].second)
        throw RecomputationError("checkpoint: output " + std::to_string(i) + " was " +
                                 to_string(outputs[i].first) + " " + to_string(outputs[i].second) +
                                 " in the forward and " + to_string(shape) + " " +
                                 to_string(dtype) + " when recomputed" + kDeterminism);
    }
  }
};

}  // namespace

std::vector<Tensor> checkpoint(CheckpointFn fn, const std::vector<Tensor>& inputs) {
  if (!fn) throw std::invalid_argument("checkpoint: the function is empty");
  // No graph, so nothing to keep or recompute; or the activations are wanted as they are.
  if (!grad_enabled() || keeping_activations) return fn(inputs);

  Recording* enclosing = recordings.empty() ? nullptr : recordings.back();
  auto rc = std::make_shared<Recomputation>();
  rc->fn = fn;
  for (const Tensor& t : inputs) {
    rc->inputs.push_back(t.defined() ? t.detach() : Tensor());
    rc->input_requires_grad.push_back(t.defined() && t.requires_grad());
  }
  Recording rec;
  rec.owner = rc;
  std::vector<Tensor> outputs;
  {
    RecordingScope scope(rec);
    outputs = fn(inputs);
  }
  const bool any = std::any_of(outputs.begin(), outputs.end(),
                               [](const Tensor& t) { return t.defined() && t.requires_grad(); });
  if (!any)
    throw std::invalid_argument(
        "checkpoint: the function returned " + std::to_string(outputs.size()) +
        " tensor(s), none of which requires grad, so the backward would never recompute it: call "
        "the function directly, or make its inputs or parameters require grad");

  for (Made& m : rec.made) {
    Recomputation::Slot slot;
    slot.op = m.op;
    slot.shape = m.shape;
    slot.dtype = m.dtype;
    if (m.node) {
      m.node->release();  // the activations go; the recomputation gives them back
      m.node->pending_recompute = rc;
      slot.node = m.node;
    } else {
      m.nested->drop_inputs();  // this checkpoint's recomputation gives them back
      slot.nested = m.nested;
      slot.is_nested = true;
    }
    rc->slots.push_back(std::move(slot));
  }
  rc->draws = std::move(rec.draws);
  for (const Tensor& t : outputs)
    rc->outputs.emplace_back(t.defined() ? t.shape() : Shape{},
                             t.defined() ? t.dtype() : DType::Float32);
  if (enclosing) {
    rc->parent = enclosing->owner;  // null inside a recomputation: nothing is dropped there
    enclosing->made.push_back({nullptr, rc, "checkpoint", {}, DType::Float32});
  }
  return outputs;
}

KeepActivationsGuard::KeepActivationsGuard() : previous_(keeping_activations) {
  keeping_activations = true;
}
KeepActivationsGuard::~KeepActivationsGuard() { keeping_activations = previous_; }

bool recompute_ahead(const std::vector<Tensor>& roots) {
  // The backward runs later nodes first: the first it would recompute is the pending node of the
  // highest sequence number.
  std::vector<Node*> todo;
  std::unordered_set<Node*> seen;
  for (const Tensor& root : roots)
    if (root.defined() && root.grad_fn() && seen.insert(root.grad_fn().get()).second)
      todo.push_back(root.grad_fn().get());
  Node* first = nullptr;
  while (!todo.empty()) {
    Node* node = todo.back();
    todo.pop_back();
    if (node->pending_recompute && (!first || node->sequence_nr > first->sequence_nr)) first = node;
    for (const Edge& edge : node->next_edges)
      if (edge.node && seen.insert(edge.node.get()).second) todo.push_back(edge.node.get());
  }
  if (!first) return false;
  // Kept alive while it runs: it clears pending_recompute of its nodes.
  std::shared_ptr<detail::PendingRecompute> pending = first->pending_recompute;
  pending->run();
  return true;
}

}  // namespace tensorplay::autograd
