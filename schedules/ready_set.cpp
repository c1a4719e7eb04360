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
}

void ReadySet::throw_out_of_range(int stage, int microbatch) const {
  const int num_stages = num_stages_;
  const int num_microbatches = num_microbatches_;
  throw std::invalid_argument("ReadySet: (stage " + std::to_string(stage) + ", microbatch " +
                              std::to_string(microbatch) + ") is outside " +
                              std::to_string(num_stages) + " stages x " +
                              std::to_string(num_microbatches) + " microbatches");
}

uint8_t& ReadySet::flags_for_update(int stage, int microbatch) {
  check(stage, microbatch);
  int64_t at = offset(stage);
  if (at < 0) {
    at = static_cast<int64_t>(flags_.size());
    if (num_inline_slots_ < kInlineSlots) {
      inline_slots_[num_inline_slots_++] = Slot{stage, at};
    } else {
      more_slots_.push_back(Slot{stage, at});
    }
    flags_.resize(flags_.size() + num_microbatches_, 0);
  }
  return flags_[at + microbatch];
}

void ReadySet::completed(const Action& action) {
  switch (action.kind) {
    case ActionKind::OverlapFB:
      for (const Action& sub : action.sub_actions) completed(sub);
      return;
    case ActionKind::Forward:
      flags_for_update(action.stage, action.microbatch) |= kForwardDone;
      return;
    case ActionKind::BackwardInput:
    case ActionKind::FullBackward:
      flags_for_update(action.stage, action.microbatch) |= action.kind == ActionKind::FullBackward
                                                               ? kInputGradDone | kWeightGradDone
                                                               : kInputGradDone;
      return;
    case ActionKind::BackwardWeight:
      flags_for_update(action.stage, action.microbatch) |= kWeightGradDone;
      return;
    default:
      return;  // communication changes nothing here: arrivals are reported explicitly
  }
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

void ReadySet::reset() { std::fill(flags_.begin(), flags_.end(), 0); }

}  // namespace tensorplay::schedules
