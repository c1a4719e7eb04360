#include "tensorplay/schedules/detail/v_block.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <tuple>

namespace tensorplay::schedules::detail {
namespace {

int rank_of(int ranks, int stage) { return stage < ranks ? stage : 2 * ranks - 1 - stage; }

// Slots used on each rank, modulo the period.
class SlotTable {
 public:
  explicit SlotTable(int ranks) : used_(static_cast<std::size_t>(ranks)) {}
  // The first slot at or after `earliest` that `rank` has free; marks it used.
  int take(int rank, int earliest) {
    auto& used = used_[static_cast<std::size_t>(rank)];
    int slot = earliest;
    while (used[static_cast<std::size_t>(slot % kVBlockPeriod)]) ++slot;
    used[static_cast<std::size_t>(slot % kVBlockPeriod)] = true;
    return slot;
  }

 private:
  std::vector<std::array<bool, kVBlockPeriod>> used_;
};

struct Costs {
  double forward, input, weight;
  double latency = 0;  // added to every hand-over between ranks
};

// Index of (kind, stage, microbatch) in a flat table of end times.
struct ActionIndex {
  int stages, n_microbatches;
  std::size_t operator()(ActionKind kind, int stage, int mb) const {
    const int k = kind == ActionKind::Forward ? 0 : kind == ActionKind::BackwardInput ? 1 : 2;
    return static_cast<std::size_t>((k * stages + stage) * n_microbatches + mb);
  }
};

// When what `a` waits for is there (its end, plus the latency when it comes from another rank),
// or -1 when it has not run yet (0 when `a` waits for nothing).
double ready_at(const Action& a, const ActionIndex& index, const std::vector<double>& end,
                double latency) {
  const int last = index.stages - 1;
  const int tip = index.stages / 2;  // stages tip - 1 and tip share the V's last rank
  std::size_t dep = 0;
  bool hop = false;
  if (a.kind == ActionKind::Forward) {
    if (a.stage == 0) return 0;
    dep = index(ActionKind::Forward, a.stage - 1, a.microbatch);
    hop = a.stage != tip;
  } else if (a.kind == ActionKind::BackwardInput) {
    dep = a.stage == last ? index(ActionKind::Forward, last, a.microbatch)
                          : index(ActionKind::BackwardInput, a.stage + 1, a.microbatch);
    hop = a.stage != last && a.stage != tip - 1;
  } else {
    dep = index(ActionKind::BackwardInput, a.stage, a.microbatch);
  }
  return end[dep] < 0 ? -1.0 : end[dep] + (hop ? latency : 0.0);
}

// Runs every rank's order as soon as each action's input is there; the step's end time.
double replay(const PipelineOrder& order, int stages, int n_microbatches, const Costs& costs) {
  const ActionIndex index{stages, n_microbatches};
  std::vector<double> end(static_cast<std::size_t>(3 * stages * n_microbatches), -1.0);
  std::vector<std::size_t> next(order.size(), 0);
  std::vector<double> free_at(order.size(), 0.0);
  for (bool moved = true; moved;) {
    moved = false;
    for (std::size_t r = 0; r < order.size(); ++r) {
      for (; next[r] < order[r].size(); ++next[r], moved = true) {
        const Action& a = order[r][next[r]];
        const double ready = ready_at(a, index, end, costs.latency);
        if (ready < 0) break;
        const double cost = a.kind == ActionKind::Forward         ? costs.forward
                            : a.kind == ActionKind::BackwardInput ? costs.input
                                                                  : costs.weight;
        free_at[r] = std::max(free_at[r], ready) + cost;
        end[index(a.kind, a.stage, a.microbatch)] = free_at[r];
      }
    }
  }
  return *std::max_element(free_at.begin(), free_at.end());
}

}  // namespace

VBlock place_v_block(int ranks, const VBlockShape& shape) {
  const int stages = 2 * ranks;
  VBlock block{ranks, std::vector<int>(stages), std::vector<int>(stages), std::vector<int>(stages)};
  SlotTable slots(ranks);
  int earliest = 0;
  for (int s = 0; s < stages; ++s) {
    block.forward[s] = slots.take(rank_of(ranks, s), earliest);
    earliest = block.forward[s] + shape.forward_gaps[s % shape.forward_gaps.size()];
  }
  earliest = block.forward[stages - 1] + 1 + shape.backward_delay;
  for (int s = stages - 1; s >= 0; --s) {
    block.input[s] = slots.take(rank_of(ranks, s), earliest);
    earliest = block.input[s] + shape.input_gap;
  }
  std::vector<int> by_input(stages);
  std::iota(by_input.begin(), by_input.end(), 0);
  std::sort(by_input.begin(), by_input.end(),
            [&](int a, int b) { return block.input[a] < block.input[b]; });
  for (int s : by_input)
    block.weight[s] = slots.take(rank_of(ranks, s), block.input[s] + 1 + shape.weight_delay);
  return block;
}

PipelineOrder repeat_v_block(const VBlock& block, int n_microbatches) {
  const int stages = 2 * block.ranks;
  std::vector<std::vector<std::pair<long long, Action>>> timed(block.ranks);
  for (int mb = 0; mb < n_microbatches; ++mb) {
    const long long shift = static_cast<long long>(mb) * kVBlockPeriod;
    for (int s = 0; s < stages; ++s) {
      auto& row = timed[static_cast<std::size_t>(rank_of(block.ranks, s))];
      row.emplace_back(block.forward[s] + shift, make_action(s, ActionKind::Forward, mb));
      row.emplace_back(block.input[s] + shift, make_action(s, ActionKind::BackwardInput, mb));
      row.emplace_back(block.weight[s] + shift, make_action(s, ActionKind::BackwardWeight, mb));
    }
  }
  PipelineOrder order(static_cast<std::size_t>(block.ranks));
  for (std::size_t r = 0; r < timed.size(); ++r) {
    std::sort(timed[r].begin(), timed[r].end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [slot, action] : timed[r]) order[r].push_back(action);
  }
  return order;
}

VBlockPeaks v_block_peaks(const VBlock& block) {
  const int span = *std::max_element(block.weight.begin(), block.weight.end()) + 1;
  const PipelineOrder steady = repeat_v_block(block, span / kVBlockPeriod + 2);
  VBlockPeaks peaks;
  for (const RankOrder& row : steady) {
    int kept = 0, stashed = 0;
    for (const Action& a : row) {
      if (a.kind == ActionKind::Forward) {
        peaks.kept = std::max(peaks.kept, ++kept);
        peaks.stashed = std::max(peaks.stashed, ++stashed);
      } else if (a.kind == ActionKind::BackwardInput) {
        --kept;
      } else {
        --stashed;
      }
    }
  }
  return peaks;
}

double v_block_time(const VBlock& block, int n_microbatches) {
  const int stages = 2 * block.ranks;
  const PipelineOrder order = repeat_v_block(block, n_microbatches);
  return replay(order, stages, n_microbatches, {1.0, 1.0, 1.0}) +
         replay(order, stages, n_microbatches, {1.0, 1.5, 0.5}) +
         replay(order, stages, n_microbatches, {1.0, 1.0, 1.0, 0.5});
}

std::vector<VBlockShape> v_block_shapes() {
  std::vector<VBlockShape> shapes;
  const std::vector<std::vector<int>> gaps = {{1}, {1, 2}, {2, 1}, {1, 1, 2}};
  for (const auto& forward_gaps : gaps)
    for (int input_gap : {1, 2})
      for (int backward_delay = 0; backward_delay < kVBlockPeriod; ++backward_delay)
        for (int weight_delay : {0, 1, 2})
          shapes.push_back({forward_gaps, input_gap, backward_delay, weight_delay});
  return shapes;
}

}  // namespace tensorplay::schedules::detail
