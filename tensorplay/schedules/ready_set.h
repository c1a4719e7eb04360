// What has arrived and completed on one rank, so a policy can ask "is this action runnable?".
// Per-stage flags of the microbatches in flight, kept inside the object in the common case.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tensorplay/schedules/action.h"

namespace tensorplay::schedules {

/// Arrivals and completions of one rank for one training step.
///
/// Stage 0's inputs are the rank's own microbatches and the last stage's output gradient comes
/// from its own loss, so those count as present without a call. A completed F of stage s also
/// counts as the input of (s+1, mb), and a completed I/B of s as the gradient of (s-1, mb): that
/// is the hand-over between two stages on the same rank (the V schedules' turn).
///
/// Storage: for each stage the rank touches, a flag byte per microbatch still in flight (a ring
/// that forgets microbatches whose F, I and W are all done), found by a short linear search:
/// small and cache-friendly at any pipeline size.
namespace detail {
struct ReadySetPrefetch;  // the simulator's cache hints
}  // namespace detail

class ReadySet {
 public:
  /// For `num_stages` stages in the whole pipeline and `num_microbatches` per step.
  ReadySet(int num_stages, int n_microbatches);

  /// The forward input of (stage, microbatch) is present.
  void input_arrived(int stage, int microbatch);
  /// The output gradient of (stage, microbatch) is present.
  void grad_arrived(int stage, int microbatch);
  /// A compute action finished (OverlapFB completes both of its sub-actions).
  void completed(const Action& action);
  /// F: input present; I/B: F completed and gradient present; W: I completed;
  /// OverlapFB: both sub-actions ready. Communication actions are always ready.
  bool ready(const Action& action) const;
  /// ready() for an action of `kind` without sub-actions (no Action needed).
  bool ready(int stage, ActionKind kind, int microbatch) const;
  /// completed() for an action of `kind` without sub-actions (no Action needed).
  void completed(int stage, ActionKind kind, int microbatch);
  /// Why `action` is not ready, e.g. "1B3: gradient not arrived" (for wait and timeout errors).
  std::string why_not_ready(const Action& action) const;
  /// Forgets everything: a new training step.
  void reset();

  // -- observers ---------------------------------------------------------------------------------

  /// True when the forward input of (stage, microbatch) is present.
  bool has_input(int stage, int microbatch) const;
  /// True when the output gradient of (stage, microbatch) is present.
  bool has_grad(int stage, int microbatch) const;
  /// True when a compute action of this kind completed for (stage, microbatch); a B counts as
  /// both I and W, an OverlapFB asks about its sub-actions.
  bool is_completed(const Action& action) const;
  /// Stages in the pipeline.
  int num_stages() const { return num_stages_; }
  /// Microbatches per step.
  int n_microbatches() const { return n_microbatches_; }

 private:
  friend struct detail::ReadySetPrefetch;
  enum Flag : uint8_t {
    kInput = 1,
    kGrad = 2,
    kForwardDone = 4,
    kInputGradDone = 8,
    kWeightGradDone = 16,
  };
  static constexpr uint8_t kComputeDone = kForwardDone | kInputGradDone | kWeightGradDone;
  static constexpr uint8_t kAll = kInput | kGrad | kComputeDone;
  static constexpr uint32_t kInlineRing = 16;

  // Flags of one stage: a ring over the microbatches still in flight. Microbatches below `base`
  // are retired (F, I and W all done: every flag set) and cost nothing, so a 1F1B-like rank
  // keeps a handful of bytes inside the object; a wide window (GPipe) spills to the heap.
  struct Slot {
    int stage = -1;
    int base = 0;                     // lowest microbatch not retired
    uint32_t head = 0;                // ring index of `base`
    uint32_t capacity = kInlineRing;  // a power of two
    uint8_t inline_ring[kInlineRing] = {};
    std::vector<uint8_t> heap_ring;  // used once the window outgrows inline_ring

    uint8_t* ring() { return heap_ring.empty() ? inline_ring : heap_ring.data(); }
    const uint8_t* ring() const { return heap_ring.empty() ? inline_ring : heap_ring.data(); }
    uint8_t get(int microbatch) const;
    void set(int microbatch, uint8_t bits);
    [[gnu::noinline]] void grow(uint32_t needed);
  };

  uint8_t flags(int stage, int microbatch) const;
  uint8_t flags_unchecked(int stage, int microbatch) const;
  void set_flags(int stage, int microbatch, uint8_t bits);
  [[gnu::noinline]] Slot* add_slot(int stage);
  const Slot* find(int stage) const;
  [[gnu::cold, gnu::noinline]] void throw_out_of_range(int stage, int microbatch) const;
  void check(int stage, int microbatch) const;

  // The stages touched so far: a few inline (the common case), the rest in more_slots_. The
  // counts come first, so a rank with one stage uses only the first lines of the object.
  static constexpr int kInlineSlots = 4;
  int num_stages_;
  int n_microbatches_;
  int num_inline_slots_ = 0;
  std::vector<Slot> more_slots_;
  Slot inline_slots_[kInlineSlots];
};

// -- inline hot paths (the simulator calls these once per event) --------------------------------

inline void ReadySet::check(int stage, int microbatch) const {
  if (stage < 0 || stage >= num_stages_ || microbatch < 0 || microbatch >= n_microbatches_) {
    throw_out_of_range(stage, microbatch);
  }
}

inline const ReadySet::Slot* ReadySet::find(int stage) const {
  for (int i = 0; i < num_inline_slots_; ++i) {
    if (inline_slots_[i].stage == stage) return &inline_slots_[i];
  }
  for (const Slot& slot : more_slots_) {
    if (slot.stage == stage) return &slot;
  }
  return nullptr;
}

inline uint8_t ReadySet::Slot::get(int microbatch) const {
  if (microbatch < base) return kAll;
  uint32_t distance = static_cast<uint32_t>(microbatch - base);
  return distance >= capacity ? 0 : ring()[(head + distance) & (capacity - 1)];
}

inline uint8_t ReadySet::flags_unchecked(int stage, int microbatch) const {
  const Slot* slot = find(stage);
  return slot == nullptr ? 0 : slot->get(microbatch);
}

inline uint8_t ReadySet::flags(int stage, int microbatch) const {
  check(stage, microbatch);
  return flags_unchecked(stage, microbatch);
}

inline void ReadySet::Slot::set(int microbatch, uint8_t bits) {
  if (microbatch < base) return;  // retired: every flag is already set
  uint32_t distance = static_cast<uint32_t>(microbatch - base);
  if (distance >= capacity) grow(distance + 1);
  uint8_t* r = ring();
  r[(head + distance) & (capacity - 1)] |= bits;
  // Retire the oldest microbatches once their F, I and W are all done. The oldest is never
  // complete between calls, so only a change to it can start a retirement.
  if (distance != 0) return;
  while ((r[head] & kComputeDone) == kComputeDone) {
    r[head] = 0;
    head = (head + 1) & (capacity - 1);
    ++base;
  }
}

inline void ReadySet::set_flags(int stage, int microbatch, uint8_t bits) {
  check(stage, microbatch);
  Slot* slot = const_cast<Slot*>(find(stage));
  if (slot == nullptr) slot = add_slot(stage);
  slot->set(microbatch, bits);
}

inline void ReadySet::completed(int stage, ActionKind kind, int microbatch) {
  switch (kind) {
    case ActionKind::Forward:
      set_flags(stage, microbatch, kForwardDone);
      return;
    case ActionKind::BackwardInput:
      set_flags(stage, microbatch, kInputGradDone);
      return;
    case ActionKind::FullBackward:
      set_flags(stage, microbatch, kInputGradDone | kWeightGradDone);
      return;
    case ActionKind::BackwardWeight:
      set_flags(stage, microbatch, kWeightGradDone);
      return;
    default:
      return;  // communication changes nothing here: arrivals are reported explicitly
  }
}

inline void ReadySet::input_arrived(int stage, int microbatch) {
  set_flags(stage, microbatch, kInput);
}

inline void ReadySet::grad_arrived(int stage, int microbatch) {
  set_flags(stage, microbatch, kGrad);
}

inline bool ReadySet::has_input(int stage, int microbatch) const {
  check(stage, microbatch);
  return stage == 0 || (flags(stage, microbatch) & kInput) ||
         (flags(stage - 1, microbatch) & kForwardDone);
}

inline bool ReadySet::has_grad(int stage, int microbatch) const {
  check(stage, microbatch);
  uint8_t f = flags(stage, microbatch);
  if (stage == num_stages_ - 1) return (f & kGrad) || (f & kForwardDone);
  return (f & kGrad) || (flags(stage + 1, microbatch) & kInputGradDone);
}

inline bool ReadySet::ready(int stage, ActionKind kind, int microbatch) const {
  switch (kind) {
    case ActionKind::Forward:
      check(stage, microbatch);
      return stage == 0 || (flags_unchecked(stage, microbatch) & kInput) ||
             (flags_unchecked(stage - 1, microbatch) & kForwardDone);
    case ActionKind::BackwardInput:
    case ActionKind::FullBackward: {
      check(stage, microbatch);
      const uint8_t f = flags_unchecked(stage, microbatch);
      if (!(f & kForwardDone)) return false;
      // has_grad(): the last stage's gradient comes from its own loss (its F is done here).
      if ((f & kGrad) || stage == num_stages_ - 1) return true;
      return flags_unchecked(stage + 1, microbatch) & kInputGradDone;
    }
    case ActionKind::BackwardWeight:
      return flags(stage, microbatch) & kInputGradDone;
    case ActionKind::OverlapFB:
      return false;  // no sub-actions
    default:
      return true;
  }
}

inline bool ReadySet::ready(const Action& action) const {
  if (action.kind == ActionKind::OverlapFB) {
    return !action.sub_actions.empty() &&
           std::all_of(action.sub_actions.begin(), action.sub_actions.end(),
                       [&](const Action& sub) { return ready(sub); });
  }
  return ready(action.stage, action.kind, action.microbatch);
}

}  // namespace tensorplay::schedules
