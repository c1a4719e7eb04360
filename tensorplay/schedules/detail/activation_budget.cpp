// ActivationBudget: the byte form of the dynamic policy's activation cap.
#include "tensorplay/schedules/detail/activation_budget.h"

#include <algorithm>
#include <stdexcept>

namespace tensorplay::schedules::detail {
namespace {

std::string bytes_text(double bytes) { return std::to_string(static_cast<long long>(bytes)); }

}  // namespace

ActivationBudget::ActivationBudget(const std::vector<int>& local_stages, int first_stage,
                                   const DynamicPolicyOptions& options)
    : cap_(options.max_activation_bytes),
      bytes_(options.activation_bytes),
      sent_(options.sent_bytes),
      workspace_(options.workspace_bytes),
      first_stage_(first_stage) {
  if (cap_ < 0)
    throw std::invalid_argument("max_activation_bytes = " + bytes_text(cap_) +
                                " is negative; give a byte cap, or 0 for none");
  if (cap_ == 0) return;
  if (bytes_.empty())
    throw std::invalid_argument(
        "max_activation_bytes is set but activation_bytes is empty: give the bytes one "
        "microbatch's forward keeps on each stage (or one value for all)");
  auto check = [&](const std::vector<double>& values, const char* name, int stage) {
    if (values.size() > 1 && static_cast<std::size_t>(stage) >= values.size())
      throw std::invalid_argument(std::string(name) + " has " + std::to_string(values.size()) +
                                  " values but this rank hosts stage " + std::to_string(stage) +
                                  "; give one value per stage or one for all");
    if (value_of(values, stage) < 0)
      throw std::invalid_argument(std::string(name) + " of stage " + std::to_string(stage) +
                                  " is negative");
  };
  double kept = 0, sent = 0;
  for (int stage : local_stages) {
    check(bytes_, "activation_bytes", stage);
    check(sent_, "sent_bytes", stage);
    check(workspace_, "workspace_bytes", stage);
    kept += value_of(bytes_, stage);
    sent += value_of(sent_, stage);
    per_microbatch_ += bytes_of(stage);
    largest_workspace_ = std::max(largest_workspace_, value_of(workspace_, stage));
  }
  const double least = per_microbatch_ + largest_workspace_;
  if (cap_ < least)
    throw std::invalid_argument(
        "max_activation_bytes = " + bytes_text(cap_) +
        " is below what one microbatch needs at its peak on this rank (" + bytes_text(kept) +
        " kept + " + bytes_text(sent) + " sent over its " + std::to_string(local_stages.size()) +
        " stage(s), + " + bytes_text(largest_workspace_) +
        " of workspace while an action runs): no cap under " + bytes_text(least) +
        " can be honoured; raise the cap to at least " + bytes_text(least) +
        ", recompute to shrink the activations, or use 0 for no cap");
}

double ActivationBudget::least_cap() const { return per_microbatch_ + largest_workspace_; }

double ActivationBudget::value_of(const std::vector<double>& values, int stage) {
  if (values.empty()) return 0;
  return values.size() == 1 ? values[0] : values.at(static_cast<std::size_t>(stage));
}

double ActivationBudget::bytes_of(int stage) const {
  return value_of(bytes_, stage) + value_of(sent_, stage);
}

bool ActivationBudget::admits(int stage) const {
  if (!capped() || stage != first_stage_) return true;  // covered by the microbatch's reservation
  // The running action's workspace comes on top of everything held at any moment.
  return held_ + reserved_ + per_microbatch_ + largest_workspace_ <= cap_;
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
         bytes_text(reserved_) + " reserved, " + bytes_text(per_microbatch_) + " per microbatch, " +
         bytes_text(largest_workspace_) + " of workspace)";
}

}  // namespace tensorplay::schedules::detail
