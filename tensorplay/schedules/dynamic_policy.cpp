// The dynamic policy: picks any ready action by priority under a cap on stashed activations.
#include <algorithm>
#include <deque>
#include <stdexcept>
#include <string>

#include "tensorplay/schedules/detail/activation_budget.h"
#include "tensorplay/schedules/policy.h"

namespace tensorplay::schedules {
namespace {

class DynamicPolicy final : public SchedulePolicy {
 public:
  DynamicPolicy(std::vector<int> local_stages, int num_stages, int n_microbatches,
                DynamicPolicyOptions options)
      : stages_(std::move(local_stages)), n_microbatches_(n_microbatches), options_(options) {
    if (stages_.empty()) {
      throw std::invalid_argument("the dynamic policy needs at least one local stage");
    }
    if (n_microbatches < 1) {
      throw std::invalid_argument("the dynamic policy needs at least 1 microbatch, got " +
                                  std::to_string(n_microbatches));
    }
    // Later stages first: they are closer to the loss, so their work unblocks the most.
    std::sort(stages_.begin(), stages_.end(), std::greater<int>());
    if (std::adjacent_find(stages_.begin(), stages_.end()) != stages_.end()) {
      throw std::invalid_argument("the dynamic policy got a local stage twice");
    }
    for (int stage : stages_) {
      if (stage < 0 || stage >= num_stages) {
        throw std::invalid_argument("local stage " + std::to_string(stage) + " is outside 0.." +
                                    std::to_string(num_stages - 1));
      }
    }
    const int local = static_cast<int>(stages_.size());
    if (options_.max_stashed_activations < 0 ||
        (options_.max_stashed_activations > 0 && options_.max_stashed_activations < local)) {
      throw std::invalid_argument(
          "max_stashed_activations = " + std::to_string(options_.max_stashed_activations) +
          " makes progress impossible: a microbatch holds one activation on each of this rank's " +
          std::to_string(local) +
          " stages before its first backward can run; use a cap of at "
          "least " +
          std::to_string(local) + " (or 0 for no cap)");
    }
    first_stage_ = stages_.back();
    budget_ = detail::ActivationBudget(stages_, first_stage_, options_);
    reset();
  }

  std::optional<Action> next(const ReadySet& ready) override {
    // 1. Backward (I or B), later stages first.
    const ActionKind backward =
        options_.split_backward ? ActionKind::BackwardInput : ActionKind::FullBackward;
    for (std::size_t i = 0; i < stages_.size(); ++i) {
      int mb = next_backward_[i];
      if (mb < next_forward_[i] && mb < n_microbatches_) {
        Action action = make_action(stages_[i], backward, mb);
        if (ready.ready(action)) {
          ++next_backward_[i];
          return action;
        }
      }
    }
    // 2. Forward, later stages first, while the cap leaves room.
    for (std::size_t i = 0; i < stages_.size(); ++i) {
      int mb = next_forward_[i];
      if (mb >= n_microbatches_) continue;
      Action action = make_action(stages_[i], ActionKind::Forward, mb);
      if (!admits(stages_[i]) || !ready.ready(action)) continue;
      ++next_forward_[i];
      budget_.started_forward(stages_[i]);
      stashed_ += activations_taken(action);
      // A new microbatch reserves room for its forwards on the other local stages.
      if (stages_[i] == first_stage_) {
        reserved_ += static_cast<int>(stages_.size()) - 1;
      } else {
        --reserved_;
      }
      peak_stashed_ = std::max(peak_stashed_, stashed_);
      return action;
    }
    // 3. Weight gradients, oldest first, when nothing else is ready.
    if (!pending_weights_.empty()) {
      Action action = pending_weights_.front();
      pending_weights_.pop_front();
      return action;
    }
    return std::nullopt;
  }

  void completed(const Action& action) override {
    ++completed_;
    if (action.kind == ActionKind::BackwardInput) {
      pending_weights_.push_back(
          make_action(action.stage, ActionKind::BackwardWeight, action.microbatch));
    }
    stashed_ -= activations_freed(action);
    budget_.completed(action);
  }

  bool finished() const override { return completed_ == total_actions(); }

  void reset() override {
    next_forward_.assign(stages_.size(), 0);
    next_backward_.assign(stages_.size(), 0);
    pending_weights_.clear();
    completed_ = 0;
    stashed_ = 0;
    reserved_ = 0;
    peak_stashed_ = 0;
    budget_.reset();
  }

  std::string describe_wait(const ReadySet& ready) const override {
    if (finished()) return "finished: all " + std::to_string(total_actions()) + " actions done";
    std::string why;
    auto add = [&](const std::string& text) { why += (why.empty() ? "" : "; ") + text; };
    const ActionKind backward =
        options_.split_backward ? ActionKind::BackwardInput : ActionKind::FullBackward;
    for (std::size_t i = 0; i < stages_.size(); ++i) {
      if (next_backward_[i] < next_forward_[i] && next_backward_[i] < n_microbatches_) {
        add(ready.why_not_ready(make_action(stages_[i], backward, next_backward_[i])));
      }
      if (next_forward_[i] < n_microbatches_) {
        Action forward = make_action(stages_[i], ActionKind::Forward, next_forward_[i]);
        if (!budget_.admits(stages_[i])) {
          add(to_string(forward) + ": " + budget_.describe());
        } else if (!admits(stages_[i])) {
          add(to_string(forward) + ": activation cap " +
              std::to_string(options_.max_stashed_activations) + " reached (" +
              std::to_string(stashed_) + " held, " + std::to_string(reserved_) + " reserved)");
        } else {
          add(ready.why_not_ready(forward));
        }
      }
    }
    if (why.empty()) why = "waiting for running actions to end";
    return "waiting for " + why;
  }

  std::size_t total_actions() const override {
    return stages_.size() * static_cast<std::size_t>(n_microbatches_) *
           (options_.split_backward ? 3 : 2);
  }

 private:
  // Whether the cap lets a forward of `stage` start now.
  bool admits(int stage) const {
    if (!budget_.admits(stage)) return false;
    if (options_.max_stashed_activations == 0) return true;
    if (stage != first_stage_) return true;  // covered by the microbatch's reservation
    return stashed_ + reserved_ + static_cast<int>(stages_.size()) <=
           options_.max_stashed_activations;
  }

  std::vector<int> stages_;  // local stages, last first
  int n_microbatches_;
  DynamicPolicyOptions options_;
  int first_stage_ = 0;
  std::vector<int> next_forward_;
  std::vector<int> next_backward_;
  std::deque<Action> pending_weights_;
  std::size_t completed_ = 0;
  int stashed_ = 0;
  int reserved_ = 0;
  int peak_stashed_ = 0;
  detail::ActivationBudget budget_;
};

}  // namespace

void DynamicPolicyOptions::cap_activation_bytes(double cap, const MemoryCosts& costs,
                                                int num_stages) {
  costs.check(num_stages);
  max_activation_bytes = cap;
  activation_bytes = costs.kept_per_stage(num_stages);
  sent_bytes = costs.sent_per_stage(num_stages);
  workspace_bytes = costs.workspace_per_stage(num_stages);
}

std::unique_ptr<SchedulePolicy> make_dynamic_policy(std::vector<int> local_stages, int num_stages,
                                                    int n_microbatches,
                                                    DynamicPolicyOptions options) {
  return std::make_unique<DynamicPolicy>(std::move(local_stages), num_stages, n_microbatches,
                                         options);
}

}  // namespace tensorplay::schedules
