// ActivationBudget: the byte form of the dynamic policy's activation cap.
#include "tensorplay/schedules/detail/activation_budget.h"

#include <stdexcept>

namespace tensorplay::schedules::detail {
namespace {

std::string bytes_text(double bytes) { return std::to_string(static_cast<long long>(bytes)); }

}  // namespace

ActivationBudget::ActivationBudget(const std::vector<int>& local_stages, int first_stage,
                                   const DynamicPolicyOptions& options)
    : cap_(options.max_activation_bytes),
      bytes_(options.activation_bytes),
      first_stage_(first_stage) {
  if (cap_ < 0)
    throw std::invalid_argument("max_activation_bytes = " + bytes_text(cap_) +
                                " is negative; give a byte cap, or 0 for none");
  if (cap_ == 0) return;
  if (bytes_.empty())
    throw std::invalid_argument(
        "max_activation_bytes is set but activation_bytes is empty: give the bytes one "
        "microbatch's forward keeps on each stage (or one value for all)");
  for (int stage : local_stages) {
    if (bytes_.size() != 1 && static_cast<std::size_t>(stage) >= bytes_.size())
      throw std::invalid_argument("activation_bytes has " + std::to_string(bytes_.size()) +
                                  " values but this rank hosts stage " + std::to_string(stage) +
                                  "; give one value per stage or one for all");
    if (bytes_of(stage) < 0)
      throw std::invalid_argument("activation_bytes of stage " + std::to_string(stage) +
                                  " is negative");
    per_microbatch_ += bytes_of(stage);
  }
  if (cap_ < per_microbatch_)
    throw std::invalid_argument(
        "max_activation_bytes = " + bytes_text(cap_) + " is below one microbatch's activations " +
        "on this rank (" + bytes_text(per_microbatch_) + " bytes over its " +
        std::to_string(local_stages.size()) +
        " stage(s)): no microbatch could start; raise the cap to at least " +
        bytes_text(per_microbatch_) + ", recompute to shrink the activations, or use 0 for no cap");
}

double ActivationBudget::bytes_of(int stage) const {
  if (bytes_.empty()) return 0;
  return bytes_.size() == 1 ? bytes_[0] : bytes_.at(static_cast<std::size_t>(stage));
}

bool ActivationBudget::admits(int stage) const {
  if (!capped() || stage != first_stage_) return true;  // covered by the microbatch's reservation
  return held_ + reserved_ + per_microbatch_ <= cap_;
}

void ActivationBudget::started_forward(int stage) {
  if (!capped()) return;
  held_ += bytes_of(stage);
  if (stage == first_stage_) {
    reserved_ += per_microbatch_ - bytes_of(stage);
  } else {
    reserved_ -= bytes_of(stage);
  }
}

void ActivationBudget::completed(const Action& action) {
  if (!capped()) return;
  auto frees = [](ActionKind k) {
    return k == ActionKind::BackwardWeight || k == ActionKind::FullBackward;
  };
  if (action.sub_actions.empty()) {
    if (frees(action.kind)) held_ -= bytes_of(action.stage);
    return;
  }
  for (const Action& sub : action.sub_actions)
    if (frees(sub.kind)) held_ -= bytes_of(sub.stage);
}

void ActivationBudget::reset() {
  held_ = 0;
  reserved_ = 0;
}

std::string ActivationBudget::describe() const {
  return "activation byte cap " + bytes_text(cap_) + " reached (" + bytes_text(held_) + " held, " +
         bytes_text(reserved_) + " reserved, " + bytes_text(per_microbatch_) + " per microbatch)";
}

}  // namespace tensorplay::schedules::detail
