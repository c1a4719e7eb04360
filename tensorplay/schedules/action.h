// Action IR: the unit of work a pipeline schedule orders (a forward, a backward part, an
// overlapped forward+backward pair, or a send/receive), with PyTorch-compatible text form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tensorplay::schedules {

/// What an action does. Strings: F I W B OVERLAP_F_B SEND_F RECV_F SEND_B RECV_B UNSHARD RESHARD
/// REDUCE_GRAD.
enum class ActionKind : uint8_t {
  Forward,         ///< F: forward of one microbatch through one stage.
  BackwardInput,   ///< I: gradient with respect to the stage input only.
  BackwardWeight,  ///< W: gradient with respect to the stage weights (after its I).
  FullBackward,    ///< B: I and W in one pass.
  OverlapFB,       ///< OVERLAP_F_B: a forward and a full backward of two stages run as one.
  SendF,           ///< SEND_F: send the forward output of (stage, mb) to the next stage.
  RecvF,           ///< RECV_F: receive the forward input of (stage, mb).
  SendB,           ///< SEND_B: send the input gradient of (stage, mb) to the previous stage.
  RecvB,           ///< RECV_B: receive the output gradient of (stage, mb).
  Unshard,         ///< UNSHARD: gather a sharded stage's parameters (once per step).
  Reshard,         ///< RESHARD: drop a sharded stage's gathered parameters.
  ReduceGrad,      ///< REDUCE_GRAD: reduce-scatter a sharded stage's gradients (once per step).
};

struct Action;

/// The parts of an OVERLAP_F_B: up to two plain actions (a forward, then a backward), held
/// inline so that an Action is a small trivially copyable value. Reads like a container of
/// Actions (size, empty, [], at, begin/end yielding Action values).
class SubActions {
 public:
  /// At most this many parts.
  static constexpr std::size_t kCapacity = 2;

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Action;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Action;
    Iterator() = default;
    Iterator(const SubActions* owner, std::size_t index) : owner_(owner), index_(index) {}
    Action operator*() const;
    Iterator& operator++() {
      ++index_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      ++index_;
      return before;
    }
    friend bool operator==(const Iterator& a, const Iterator& b) { return a.index_ == b.index_; }
    friend difference_type operator-(const Iterator& a, const Iterator& b) {
      return static_cast<difference_type>(a.index_) - static_cast<difference_type>(b.index_);
    }

   private:
    const SubActions* owner_ = nullptr;
    std::size_t index_ = 0;
  };

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  /// Part `i` (i < size()).
  Action operator[](std::size_t i) const;
  /// Part `i`; throws std::out_of_range past the end.
  Action at(std::size_t i) const;
  Iterator begin() const { return {this, 0}; }
  Iterator end() const { return {this, size_}; }
  /// Appends a plain action; throws std::invalid_argument when full or when `part` has parts.
  void push_back(const Action& part);

  friend bool operator==(const SubActions& a, const SubActions& b) = default;

 private:
  // Unused parts stay zero, so == compares the used ones. Field by field, so an Action is 32
  // bytes: the simulator keeps one per rank and policies hand them out by value.
  int32_t stages_[kCapacity] = {};
  int32_t microbatches_[kCapacity] = {};
  ActionKind kinds_[kCapacity] = {};
  uint8_t size_ = 0;
};

/// One scheduled action. For OverlapFB, `sub_actions` is {forward action, backward action} and
/// `stage`/`microbatch` are -1 (as in PyTorch, the container has no stage of its own). A plain
/// value (trivially copyable): the runtime, the policies and the simulator pass it as it is.
struct Action {
  int stage = 0;
  ActionKind kind = ActionKind::Forward;
  int microbatch = 0;
  SubActions sub_actions;

  friend bool operator==(const Action& a, const Action& b) = default;
};
static_assert(std::is_trivially_copyable_v<Action>);

static_assert(sizeof(Action) <= 32);

inline Action SubActions::operator[](std::size_t i) const {
  return Action{stages_[i], kinds_[i], microbatches_[i], {}};
}
inline Action SubActions::Iterator::operator*() const { return (*owner_)[index_]; }

/// Hash usable in unordered containers.
struct ActionHash {
  std::size_t operator()(const Action& action) const noexcept;
};

/// One rank's ordered actions.
using RankOrder = std::vector<Action>;
/// Index = rank.
using PipelineOrder = std::vector<RankOrder>;

// -- constructors ---------------------------------------------------------------------------------

/// A compute or communication action on one stage and microbatch (inline: generators make
/// millions). The sharding actions (UNSHARD, RESHARD, REDUCE_GRAD) have no microbatch: pass 0.
inline Action make_action(int stage, ActionKind kind, int microbatch) {
  Action action;
  action.stage = stage;
  action.kind = kind;
  action.microbatch = microbatch;
  return action;
}
/// An OVERLAP_F_B action running `forward` (kind F) and `backward` (kind B) together.
Action make_overlap(Action forward, Action backward);

// -- kinds ----------------------------------------------------------------------------------------

/// The kind's text: "F", "I", "W", "B", "OVERLAP_F_B", "SEND_F", "RECV_F", "SEND_B", "RECV_B",
/// "UNSHARD", "RESHARD", "REDUCE_GRAD".
std::string_view kind_name(ActionKind kind);
/// True for F, I, W, B and OVERLAP_F_B.
constexpr bool is_compute(ActionKind kind) { return kind <= ActionKind::OverlapFB; }
/// True for SEND_F, RECV_F, SEND_B and RECV_B: the transfers between stages.
constexpr bool is_communication(ActionKind kind) {
  return kind >= ActionKind::SendF && kind <= ActionKind::RecvB;
}
/// True for UNSHARD, RESHARD and REDUCE_GRAD: the actions of a stage whose parameters are sharded
/// over its data-parallel group (one per stage and step, no microbatch). They belong to the
/// compute-only order: strip_communication keeps them, the validator checks them.
constexpr bool is_sharding(ActionKind kind) { return kind >= ActionKind::Unshard; }
/// True for I and B: the actions that produce the gradient for the previous stage.
constexpr bool is_input_backward(ActionKind kind) {
  return kind == ActionKind::BackwardInput || kind == ActionKind::FullBackward;
}
/// Whether `next` is the backward (I or B) of the plain forward `forward`: the same stage and
/// microbatch. When a rank's order runs it right after that F, a recomputing stage keeps the F's
/// activations instead of rebuilding them at once (the runtime's stage workers and the simulator
/// both apply this rule).
inline bool is_backward_of(const Action& next, const Action& forward) {
  return forward.kind == ActionKind::Forward && forward.sub_actions.empty() &&
         next.sub_actions.empty() && is_input_backward(next.kind) && next.stage == forward.stage &&
         next.microbatch == forward.microbatch;
}
/// The stages of one rank's order whose every forward is followed at once (communication
/// aside) by that microbatch's own backward (is_backward_of), in ascending order: recomputation
/// saves nothing there (the backward would rebuild the activations at once), so the runtime runs
/// them without it (PipelineStage::set_skip_recompute). A stage with a forward inside an
/// OVERLAP_F_B is not one of them.
std::vector<int> stages_with_backward_after_each_forward(const RankOrder& order);
/// True for W and B: the actions that free the stashed activation of a microbatch.
constexpr bool frees_activation(ActionKind kind) {
  return kind == ActionKind::BackwardWeight || kind == ActionKind::FullBackward;
}
/// The one count of stashed activations (simulator, policies, stage actors' logs, tp-trace):
/// how many activations `action` holds from its start (each F, an OVERLAP_F_B's forward
/// included: a microbatch's activation on one stage, held until its W or B ends).
inline int activations_taken(const Action& action) {
  if (action.sub_actions.empty()) return action.kind == ActionKind::Forward ? 1 : 0;
  int taken = 0;
  for (const Action& sub : action.sub_actions) taken += sub.kind == ActionKind::Forward ? 1 : 0;
  return taken;
}
/// How many activations `action` frees when it ends (each W or B, an OVERLAP_F_B's included).
inline int activations_freed(const Action& action) {
  auto frees = [](ActionKind k) {
    return k == ActionKind::BackwardWeight || k == ActionKind::FullBackward;
  };
  if (action.sub_actions.empty()) return frees(action.kind) ? 1 : 0;
  int freed = 0;
  for (const Action& sub : action.sub_actions) freed += frees(sub.kind) ? 1 : 0;
  return freed;
}

// -- text form ------------------------------------------------------------------------------------

/// PyTorch's form: "1F0", "0B3", "3SEND_F1", "(0F3;3B1)OVERLAP_F_B", "2UNSHARD" (the sharding
/// actions carry no microbatch).
std::string to_string(const Action& action);
/// Inverse of to_string; throws std::invalid_argument naming the bad text.
Action parse_action(std::string_view text);
/// Space-separated actions, e.g. "0F0 0F1 0B0".
std::string to_string(const RankOrder& order);
/// Parses space- or comma-separated actions ("0F0 0F1 0B0").
RankOrder parse_rank_order(std::string_view text);

}  // namespace tensorplay::schedules
