// The static-order policy's class: follows a generated (or loaded) order, waiting for each
// action's inputs. Private to the schedules layer: the simulator reaches its cache hint here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorplay/schedules/policy.h"

namespace tensorplay::schedules::detail {

// Aligned so that the vtable pointer and the cursor share one cache line.
class alignas(64) StaticOrderPolicy final : public SchedulePolicy {
 public:
  /// Compact form of one action in 8 bytes (this policy may hold millions): the stage, and the
  /// microbatch and kind in one word. Composites (OVERLAP_F_B) keep their full action apart,
  /// indexed by `stage` (at() unpacks either).
  struct Entry {
    static constexpr int kKindBits = 4;
    static constexpr int64_t kMaxMicrobatch = (int64_t{1} << (32 - kKindBits)) - 1;
    int32_t stage = 0;
    uint32_t word = 0;  // microbatch << kKindBits | kind

    Entry() = default;
    Entry(int stage_, int microbatch, ActionKind kind)
        : stage(stage_),
          word(static_cast<uint32_t>(microbatch) << kKindBits | static_cast<uint32_t>(kind)) {}
    int microbatch() const { return static_cast<int>(word >> kKindBits); }
    ActionKind kind() const { return static_cast<ActionKind>(word & ((1u << kKindBits) - 1)); }
    bool composite() const { return kind() == ActionKind::OverlapFB; }
  };
  static_assert(sizeof(Entry) == 8);

  explicit StaticOrderPolicy(RankOrder order) {
    order_.reserve(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      Action& action = order[i];
      if (is_communication(action.kind)) {
        throw std::invalid_argument(
            "the static-order policy takes compute actions only (sharding ones too), but "
            "position " +
            std::to_string(i) + " holds '" + to_string(action) +
            "'; pass the compute-only order (strip_communication)");
      }
      if (action.sub_actions.empty()) {
        if (action.microbatch < 0 || action.microbatch > Entry::kMaxMicrobatch ||
            action.kind == ActionKind::OverlapFB) {
          throw std::invalid_argument("the static-order policy takes microbatches 0 to " +
                                      std::to_string(Entry::kMaxMicrobatch) +
                                      " (and OVERLAP_F_B with its two parts), "
                                      "but position " +
                                      std::to_string(i) + " holds '" + to_string(action) + "'");
        }
        order_.emplace_back(action.stage, action.microbatch, action.kind);
      } else {
        order_.emplace_back(static_cast<int>(composites_.size()), 0, action.kind);
        composites_.push_back(std::move(action));
      }
    }
    total_ = order_.size();
  }

  std::optional<Action> next(const ReadySet& ready) override {
    if (next_ >= total_) return std::nullopt;
    if (next_ - window_start_ >= window_size_) refill_window();
    const Entry entry = window_[next_ - window_start_];
    if (entry.composite()) {  // its full action
      const Action& action = composites_[entry.stage];
      if (!ready.ready(action)) return std::nullopt;
      ++next_;
      return action;
    }
    if (!ready.ready(entry.stage, entry.kind(), entry.microbatch())) return std::nullopt;
    ++next_;
    // Built in place: a temporary copied into the optional cost a store-forwarding stall here.
    return std::optional<Action>(std::in_place, entry.stage, entry.kind(), entry.microbatch());
  }

  /// The simulator's cache hint: next() will read the next entry soon.
  void prefetch_next() const {
    const std::size_t index = next_ - window_start_;
    if (index < window_size_) __builtin_prefetch(&window_[index]);
  }

  void completed(const Action&) override { ++completed_; }

  bool finished() const override { return completed_ == order_.size(); }

  void reset() override {
    next_ = 0;
    completed_ = 0;
    window_start_ = 0;
    window_size_ = 0;
  }

  std::string describe_wait(const ReadySet& ready) const override {
    if (finished()) return "finished: all " + std::to_string(order_.size()) + " actions done";
    if (next_ >= order_.size()) {
      return "waiting for " + std::to_string(next_ - completed_) + " running action(s) to end";
    }
    const Action action = at(next_);
    std::string position = " (action " + std::to_string(next_) + " of " +
                           std::to_string(order_.size()) + " in the static order)";
    if (ready.ready(action)) return to_string(action) + " is ready" + position;
    return "waiting for " + ready.why_not_ready(action) + position;
  }

  std::size_t total_actions() const override { return order_.size(); }

  bool is_static_order() const override { return true; }

  /// Action `i` of the order (the static sweep of simulator.cpp reads the order in place).
  Action at(std::size_t i) const {
    Action action;
    unpack(order_[i], action);
    return action;
  }
  /// The order in place (total_actions() entries), for the static sweep.
  const Entry* entries() const { return order_.data(); }
  /// Every action ran: the state the event loop leaves once the order is done.
  void mark_finished() {
    next_ = completed_ = order_.size();
    window_start_ = next_;
    window_size_ = 0;
  }

  std::optional<Action> next_in_order() const override {
    if (next_ >= order_.size()) return std::nullopt;
    return at(next_);
  }

 private:
  void unpack(const Entry& entry, Action& out) const {
    if (entry.composite()) {
      out = composites_[entry.stage];
      return;
    }
    out.stage = entry.stage;
    out.kind = entry.kind();
    out.microbatch = entry.microbatch();
  }

  // The next few entries, copied into the policy object itself. A simulator of thousands of
  // ranks visits each rank only after all others moved; reading a rank's long order in place
  // would then miss cache and TLB on nearly every action, the window misses once per refill.
  static constexpr std::size_t kWindow = 64;
  void refill_window() {
    window_start_ = next_;
    window_size_ = std::min(kWindow, order_.size() - next_);
    std::copy_n(order_.begin() + static_cast<std::ptrdiff_t>(next_), window_size_, window_);
  }

  // The cursor first: it shares a cache line with the vtable pointer.
  std::size_t next_ = 0;
  std::size_t completed_ = 0;
  std::size_t window_start_ = 0;
  std::size_t window_size_ = 0;
  std::size_t total_ = 0;  // order_.size()
  Entry window_[kWindow] = {};
  std::vector<Entry> order_;
  std::vector<Action> composites_;
};

}  // namespace tensorplay::schedules::detail
