#include "tensorplay/schedules/ready_set.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tensorplay::schedules {

ReadySet::ReadySet(int num_stages, int n_microbatches)
    : num_stages_(num_stages), n_microbatches_(n_microbatches) {
  if (num_stages < 1 || n_microbatches < 1) {
    throw std::invalid_argument("ReadySet needs num_stages >= 1 and num_microbatches >= 1, got " +
                                std::to_string(num_stages) + " and " +
                                std::to_string(n_microbatches));
  }
}

void ReadySet::throw_out_of_range(int stage, int microbatch) const {
  const int num_stages = num_stages_;
  const int n_microbatches = n_microbatches_;
  throw std::invalid_argument("ReadySet: (stage " + std::to_string(stage) + ", microbatch " +
                              std::to_string(microbatch) + ") is outside " +
                              std::to_string(num_stages) + " stages x " +
                              std::to_string(n_microbatches) + " microbatches");
}

void ReadySet::Slot::grow(uint32_t needed) {
  uint32_t bigger = capacity;
  while (bigger < needed) bigger *= 2;
  std::vector<uint8_t> fresh(bigger, 0);
  const uint8_t* old = ring();
  for (uint32_t i = 0; i < capacity; ++i) fresh[i] = old[(head + i) & (capacity - 1)];
  heap_ring = std::move(fresh);
  head = 0;
  capacity = bigger;
}

ReadySet::Slot* ReadySet::add_slot(int stage) {
  Slot* slot = num_inline_slots_ < kInlineSlots ? &inline_slots_[num_inline_slots_++]
                                                : &more_slots_.emplace_back();
  slot->stage = stage;
  return slot;
}

void ReadySet::completed(const Action& action) {
  if (action.kind == ActionKind::OverlapFB) {
    for (const Action& sub : action.sub_actions) completed(sub);
    return;
  }
  completed(action.stage, action.kind, action.microbatch);
}

bool ReadySet::is_completed(const Action& action) const {
  if (action.kind == ActionKind::OverlapFB) {
    return std::all_of(action.sub_actions.begin(), action.sub_actions.end(),
                       [&](const Action& sub) { return is_completed(sub); });
  }
  check(action.stage, action.microbatch);
  uint8_t f = flags(action.stage, action.microbatch);
  switch (action.kind) {
    case ActionKind::Forward:
      return f & kForwardDone;
    case ActionKind::BackwardInput:
      return f & kInputGradDone;
    case ActionKind::BackwardWeight:
      return f & kWeightGradDone;
    case ActionKind::FullBackward:
      return (f & kInputGradDone) && (f & kWeightGradDone);
    default:
      return false;
  }
}

std::string ReadySet::why_not_ready(const Action& action) const {
  std::string name = to_string(action);
  switch (action.kind) {
    case ActionKind::OverlapFB: {
      std::string why;
      for (const Action& sub : action.sub_actions) {
        if (ready(sub)) continue;
        why += why.empty() ? "" : "; ";
        why += why_not_ready(sub);
      }
      return why.empty() ? name + " is ready" : why;
    }
    case ActionKind::Forward:
      return has_input(action.stage, action.microbatch) ? name + " is ready"
                                                        : name + ": input not arrived";
    case ActionKind::BackwardInput:
    case ActionKind::FullBackward:
      if (!(flags(action.stage, action.microbatch) & kForwardDone)) {
        return name + ": its forward " + std::to_string(action.stage) + "F" +
               std::to_string(action.microbatch) + " has not completed";
      }
      return has_grad(action.stage, action.microbatch) ? name + " is ready"
                                                       : name + ": gradient not arrived";
    case ActionKind::BackwardWeight:
      return ready(action) ? name + " is ready"
                           : name + ": its input backward " + std::to_string(action.stage) + "I" +
                                 std::to_string(action.microbatch) + " has not completed";
    default:
      return name + " is ready";
  }
}

void ReadySet::reset() {
  auto clear = [](Slot& slot) {
    slot.base = 0;
    slot.head = 0;
    std::fill(slot.ring(), slot.ring() + slot.capacity, 0);
  };
  for (int i = 0; i < num_inline_slots_; ++i) clear(inline_slots_[i]);
  for (Slot& slot : more_slots_) clear(slot);
}

}  // namespace tensorplay::schedules
