// The simulator's sweep over static orders (detail/static_sweep.h).
//
// Each pass visits every rank and runs as many of its next actions as have all their inputs
// computed; passes alternate between rising and falling rank order, so that a forward wave and a
// backward wave each cross the pipeline in one pass. Times live in two tables indexed
// [stage][microbatch] (the end of each F, and of each I or B): a rank writes its stages' rows in
// microbatch order and reads its neighbours' rows just behind where they wrote, so the lines a
// pass touches stay in cache.
#include "tensorplay/schedules/detail/static_sweep.h"

#include <algorithm>

namespace tensorplay::schedules::detail {
namespace {

constexpr double kUnknown = -1.0;  // not computed yet (times are >= 0: costs are)

// A stage's row of times, rounded up to whole cache lines plus one more: rows a power of two apart
// would put every rank's current line in the same few cache sets.
std::size_t padded_row(int n_microbatches) {
  constexpr std::size_t kLine = 64 / sizeof(double);
  return (static_cast<std::size_t>(n_microbatches) + kLine - 1) / kLine * kLine + kLine;
}

class Sweep {
 public:
  Sweep(const std::vector<StaticOrderPolicy*>& orders, const std::vector<int>& stage_to_rank,
        int n_microbatches, const StepCosts& costs, bool record_timeline)
      : orders_(orders),
        stage_to_rank_(stage_to_rank),
        num_stages_(static_cast<int>(stage_to_rank.size())),
        n_microbatches_(n_microbatches),
        costs_(costs),
        record_timeline_(record_timeline),
        row_(padded_row(n_microbatches)),
        cursors_(orders.size()) {
    const std::size_t cells = static_cast<std::size_t>(num_stages_) * row_;
    forward_end_.assign(cells, kUnknown);
    backward_end_.assign(cells, kUnknown);
    outcome_.ranks.resize(orders.size());
    for (std::size_t rank = 0; rank < orders.size(); ++rank) {
      cursors_[rank].entries = orders[rank]->entries();
      cursors_[rank].total = orders[rank]->total_actions();
      remaining_ += cursors_[rank].total;
    }
  }

  std::optional<SweepOutcome> run() {
    const int ranks = static_cast<int>(orders_.size());
    bool rising = true;
    while (remaining_ > 0) {
      bool ran = false;
      for (int i = 0; i < ranks; ++i) {
        // The next rank's order is read where it stopped: fetch that line while this one runs.
        if (i + 1 < ranks) prefetch(rising ? i + 1 : ranks - 2 - i);
        ran |= advance(rising ? i : ranks - 1 - i);
      }
      if (failed_ || !ran) return std::nullopt;
      rising = !rising;
    }
    return std::move(outcome_);
  }

 private:
  struct Cursor {
    const StaticOrderPolicy::Entry* entries = nullptr;  // the rank's order in place
    std::size_t next = 0;
    std::size_t total = 0;
    double free_at = 0.0;  // the end of the rank's last action
    int stashed = 0;
  };

  void prefetch(int rank) const {
    const Cursor& cursor = cursors_[rank];
    if (cursor.next < cursor.total) __builtin_prefetch(cursor.entries + cursor.next);
  }

  std::size_t cell(int stage, int microbatch) const {
    return static_cast<std::size_t>(stage) * row_ + microbatch;
  }

  bool inside(int stage, int microbatch) const {
    return stage >= 0 && stage < num_stages_ && microbatch >= 0 && microbatch < n_microbatches_;
  }

  // When an output ending at `end` on `producer`'s rank is on `rank`: at once on the same rank,
  // after the boundary's transfer otherwise.
  double arrival(double end, int producer, int boundary, int rank) const {
    if (end == kUnknown) return kUnknown;
    return stage_to_rank_[producer] == rank ? end : end + costs_.transfer_after(boundary);
  }

  // When (stage, kind, microbatch) may start on `rank` as far as its inputs go, or kUnknown.
  double ready_time(int stage, ActionKind kind, int microbatch, int rank) const {
    if (is_sharding(kind)) return 0.0;  // the stage's own rank: ready once the rank is free
    const std::size_t at = cell(stage, microbatch);
    switch (kind) {
      case ActionKind::Forward:
        return stage == 0 ? 0.0 : arrival(forward_end_[at - row_], stage - 1, stage - 1, rank);
      case ActionKind::BackwardInput:
      case ActionKind::FullBackward: {
        const double forward = forward_end_[at];  // this rank's own F: never later than it is free
        if (forward == kUnknown || stage == num_stages_ - 1) return forward;
        const double grad = arrival(backward_end_[at + row_], stage + 1, stage, rank);
        return grad == kUnknown ? kUnknown : std::max(forward, grad);
      }
      case ActionKind::BackwardWeight:
        return backward_end_[at];  // its I, on this rank
      default:
        return kUnknown;  // no other kind is in a static order
    }
  }

  double ready_time(const Action& action, int rank) const {
    if (action.sub_actions.empty())
      return ready_time(action.stage, action.kind, action.microbatch, rank);
    double ready = 0.0;
    for (const Action& part : action.sub_actions) {
      const double t = ready_time(part.stage, part.kind, part.microbatch, rank);
      if (t == kUnknown) return kUnknown;
      ready = std::max(ready, t);
    }
    return ready;
  }

  bool inside(const Action& action) const {
    if (action.sub_actions.empty()) return inside(action.stage, action.microbatch);
    for (const Action& part : action.sub_actions)
      if (!inside(part.stage, part.microbatch)) return false;
    return true;
  }

  void completed(int stage, ActionKind kind, int microbatch, double end) {
    if (kind == ActionKind::Forward) forward_end_[cell(stage, microbatch)] = end;
    if (is_input_backward(kind)) backward_end_[cell(stage, microbatch)] = end;
  }

  // Runs the rank's next actions while their inputs are computed; true when it ran one.
  bool advance(int rank) {
    Cursor& cursor = cursors_[rank];
    const std::size_t first = cursor.next;
    while (cursor.next < cursor.total) {
      const StaticOrderPolicy::Entry entry = cursor.entries[cursor.next];
      // Plain actions straight from the entry; a composite unpacked whole.
      const Action action = entry.composite()
                                ? orders_[rank]->at(cursor.next)
                                : Action{entry.stage, entry.kind(), entry.microbatch(), {}};
      if (!inside(action)) {
        failed_ = true;  // the event loop reports it
        return false;
      }
      const double ready = ready_time(action, rank);
      if (ready == kUnknown) break;
      start(action, rank, std::max(cursor.free_at, ready));
    }
    const std::size_t ran = cursor.next - first;
    remaining_ -= ran;
    outcome_.actions += ran;
    return ran > 0;
  }

  // Runs `action` on `rank` from time `at`: its end, the rank's figures, the times it gives others.
  void start(const Action& action, int rank, double at) {
    Cursor& cursor = cursors_[rank];
    SweepRank& figures = outcome_.ranks[rank];
    const double end = at + costs_.duration(action);
    cursor.stashed += activations_taken(action);
    figures.peak = std::max(figures.peak, cursor.stashed);
    if (figures.first_start < 0) figures.first_start = at;
    figures.busy += end - at;
    figures.last_end = end;
    cursor.stashed -= activations_freed(action);
    if (action.sub_actions.empty()) {
      completed(action.stage, action.kind, action.microbatch, end);
    } else {
      for (const Action& part : action.sub_actions)
        completed(part.stage, part.kind, part.microbatch, end);
    }
    if (record_timeline_) outcome_.timeline.push_back(TimelineEvent{rank, action, at, end});
    cursor.free_at = end;
    ++cursor.next;
  }

  const std::vector<StaticOrderPolicy*>& orders_;
  const std::vector<int>& stage_to_rank_;
  int num_stages_;
  int n_microbatches_;
  const StepCosts& costs_;
  bool record_timeline_;
  std::size_t row_;  // elements from one stage's row to the next
  std::vector<Cursor> cursors_;
  std::vector<double> forward_end_;   // [stage][microbatch]: when its F ended, or kUnknown
  std::vector<double> backward_end_;  // [stage][microbatch]: when its I or B ended, or kUnknown
  std::size_t remaining_ = 0;
  bool failed_ = false;
  SweepOutcome outcome_;
};

}  // namespace

std::optional<SweepOutcome> sweep_static_orders(const std::vector<StaticOrderPolicy*>& orders,
                                                const std::vector<int>& stage_to_rank,
                                                int n_microbatches, const StepCosts& costs,
                                                bool record_timeline) {
  return Sweep(orders, stage_to_rank, n_microbatches, costs, record_timeline).run();
}

}  // namespace tensorplay::schedules::detail
