#include "schedules/ready_set.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tensorplay::schedules {

ReadySet::ReadySet(int num_stages, int num_microbatches)
    : num_stages_(num_stages), num_microbatches_(num_microbatches) {
  if (num_stages < 1 || num_microbatches < 1) {
    throw std::invalid_argument("ReadySet needs num_stages >= 1 and num_microbatches >= 1, got " +
                                std::to_string(num_stages) + " and " +
                                std::to_string(num_microbatches));
  }
  slot_of_stage_.assign(num_stages, -1);
}

void ReadySet::check(int stage, int microbatch) const {
  if (stage < 0 || stage >= num_stages_ || microbatch < 0 || microbatch >= num_microbatches_) {
    throw std::invalid_argument("ReadySet: (stage " + std::to_string(stage) + ", microbatch " +
                                std::to_string(microbatch) + ") is outside " +
                                std::to_string(num_stages_) + " stages x " +
                                std::to_string(num_microbatches_) + " microbatches");
  }
}

uint8_t ReadySet::flags(int stage, int microbatch) const {
  check(stage, microbatch);
  int slot = slot_of_stage_[stage];
  return slot < 0 ? 0 : slots_[slot][microbatch];
}

uint8_t& ReadySet::flags_for_update(int stage, int microbatch) {
  check(stage, microbatch);
  int& slot = slot_of_stage_[stage];
  if (slot < 0) {
    slot = static_cast<int>(slots_.size());
    slots_.emplace_back(num_microbatches_, 0);
  }
  return slots_[slot][microbatch];
}

void ReadySet::input_arrived(int stage, int microbatch) {
  flags_for_update(stage, microbatch) |= kInput;
}

void ReadySet::grad_arrived(int stage, int microbatch) {
  flags_for_update(stage, microbatch) |= kGrad;
}

void ReadySet::completed(const Action& action) {
  switch (action.kind) {
    case ActionKind::OverlapFB:
      for (const Action& sub : action.sub_actions) completed(sub);
      return;
    case ActionKind::Forward:
      flags_for_update(action.stage, action.microbatch) |= kForwardDone;
      if (action.stage + 1 < num_stages_) input_arrived(action.stage + 1, action.microbatch);
      return;
    case ActionKind::BackwardInput:
    case ActionKind::FullBackward:
      flags_for_update(action.stage, action.microbatch) |=
          action.kind == ActionKind::FullBackward ? kInputGradDone | kWeightGradDone
                                                  : kInputGradDone;
      if (action.stage > 0) grad_arrived(action.stage - 1, action.microbatch);
      return;
    case ActionKind::BackwardWeight:
      flags_for_update(action.stage, action.microbatch) |= kWeightGradDone;
      return;
    default:
      return;  // communication changes nothing here: arrivals are reported explicitly
  }
}

bool ReadySet::has_input(int stage, int microbatch) const {
  check(stage, microbatch);
  return stage == 0 || (flags(stage, microbatch) & kInput);
}

bool ReadySet::has_grad(int stage, int microbatch) const {
  check(stage, microbatch);
  uint8_t f = flags(stage, microbatch);
  return (f & kGrad) || (stage == num_stages_ - 1 && (f & kForwardDone));
}

bool ReadySet::is_completed(const Action& action) const {
  if (action.kind == ActionKind::OverlapFB) {
    return std::all_of(action.sub_actions.begin(), action.sub_actions.end(),
                       [&](const Action& sub) { return is_completed(sub); });
  }
  check(action.stage, action.microbatch);
  uint8_t f = flags(action.stage, action.microbatch);
  switch (action.kind) {
    case ActionKind::Forward: return f & kForwardDone;
    case ActionKind::BackwardInput: return f & kInputGradDone;
    case ActionKind::BackwardWeight: return f & kWeightGradDone;
    case ActionKind::FullBackward: return (f & kInputGradDone) && (f & kWeightGradDone);
    default: return false;
  }
}

bool ReadySet::ready(const Action& action) const {
  switch (action.kind) {
    case ActionKind::OverlapFB:
      return !action.sub_actions.empty() &&
             std::all_of(action.sub_actions.begin(), action.sub_actions.end(),
                         [&](const Action& sub) { return ready(sub); });
    case ActionKind::Forward:
      return has_input(action.stage, action.microbatch);
    case ActionKind::BackwardInput:
    case ActionKind::FullBackward:
      return (flags(action.stage, action.microbatch) & kForwardDone) &&
             has_grad(action.stage, action.microbatch);
    case ActionKind::BackwardWeight:
      return flags(action.stage, action.microbatch) & kInputGradDone;
    default:
      return true;
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
  for (auto& slot : slots_) std::fill(slot.begin(), slot.end(), 0);
}

}  // namespace tensorplay::schedules
