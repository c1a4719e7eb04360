// The static-order policy: follows a generated (or loaded) order, waiting for each action's inputs.
#include <stdexcept>
#include <string>

#include "schedules/policy.h"

namespace tensorplay::schedules {
namespace {

class StaticOrderPolicy final : public SchedulePolicy {
 public:
  explicit StaticOrderPolicy(RankOrder order) : order_(std::move(order)) {
    for (std::size_t i = 0; i < order_.size(); ++i) {
      if (!is_compute(order_[i].kind)) {
        throw std::invalid_argument(
            "the static-order policy takes compute actions only, but position " +
            std::to_string(i) + " holds '" + to_string(order_[i]) +
            "'; pass the compute-only order (strip_communication)");
      }
    }
  }

  std::optional<Action> next(const ReadySet& ready) override {
    if (next_ >= order_.size() || !ready.ready(order_[next_])) return std::nullopt;
    return order_[next_++];
  }

  void completed(const Action&) override { ++completed_; }

  bool finished() const override { return completed_ == order_.size(); }

  void reset() override {
    next_ = 0;
    completed_ = 0;
  }

  std::string describe_wait(const ReadySet& ready) const override {
    if (finished()) return "finished: all " + std::to_string(order_.size()) + " actions done";
    if (next_ >= order_.size()) {
      return "waiting for " + std::to_string(next_ - completed_) + " running action(s) to end";
    }
    const Action& action = order_[next_];
    std::string position = " (action " + std::to_string(next_) + " of " +
                           std::to_string(order_.size()) + " in the static order)";
    if (ready.ready(action)) return to_string(action) + " is ready" + position;
    return "waiting for " + ready.why_not_ready(action) + position;
  }

  std::size_t total_actions() const override { return order_.size(); }

 private:
  RankOrder order_;
  std::size_t next_ = 0;
  std::size_t completed_ = 0;
};

}  // namespace

std::unique_ptr<SchedulePolicy> make_static_order_policy(RankOrder compute_order) {
  return std::make_unique<StaticOrderPolicy>(std::move(compute_order));
}

}  // namespace tensorplay::schedules
