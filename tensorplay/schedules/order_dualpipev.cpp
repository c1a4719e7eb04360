// DualPipeV (DeepSeek's DualPipe folded into a V, as in deepseek-ai/DualPipe dualpipev.py and
// PyTorch's ScheduleDualPipeV): two stages per rank in V placement, read as its eight steps.
#include <deque>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "tensorplay/schedules/detail/generator_checks.h"
#include "tensorplay/schedules/generators.h"

namespace tensorplay::schedules {
namespace {

// Per-rank builder: tracks the next microbatch of each (stage, kind) and the queue of W passes
// owed by earlier I passes.
class DualPipeVBuilder {
 public:
  explicit DualPipeVBuilder(RankOrder& ops) : ops_(ops) {}

  // A single action; B advances both the I and the W counters of its stage.
  void add(int stage, ActionKind kind) {
    ActionKind counter_kind = kind == ActionKind::FullBackward ? ActionKind::BackwardInput : kind;
    int mb = next(stage, counter_kind);
    ops_.push_back(make_action(stage, kind, mb));
    if (kind == ActionKind::FullBackward) {
      bump_backward(stage);
      return;
    }
    if (kind == ActionKind::BackwardInput) pending_weights_.emplace_back(stage, mb);
    counters_[{stage, counter_kind}] = mb + 1;
  }

  // Forward of `forward_stage` overlapped with the full backward of `backward_stage`.
  void add_overlap(int forward_stage, int backward_stage) {
    int forward_mb = next(forward_stage, ActionKind::Forward);
    int backward_mb = next(backward_stage, ActionKind::BackwardInput);
    ops_.push_back(
        make_overlap(make_action(forward_stage, ActionKind::Forward, forward_mb),
                     make_action(backward_stage, ActionKind::FullBackward, backward_mb)));
    counters_[{forward_stage, ActionKind::Forward}] = forward_mb + 1;
    bump_backward(backward_stage);
  }

  // The oldest owed W pass, if any.
  void add_pending_weight() {
    if (pending_weights_.empty()) return;
    auto [stage, mb] = pending_weights_.front();
    pending_weights_.pop_front();
    ops_.push_back(make_action(stage, ActionKind::BackwardWeight, mb));
    ++counters_[{stage, ActionKind::BackwardWeight}];
  }

 private:
  int next(int stage, ActionKind kind) {
    auto it = counters_.find({stage, kind});
    return it == counters_.end() ? 0 : it->second;
  }
  void bump_backward(int stage) {
    ++counters_[{stage, ActionKind::BackwardInput}];
    ++counters_[{stage, ActionKind::BackwardWeight}];
  }

  RankOrder& ops_;
  std::map<std::pair<int, ActionKind>, int> counters_;
  std::deque<std::pair<int, int>> pending_weights_;
};

RankOrder dualpipev_rank_ops(int rank, int ranks, int chunks) {
  RankOrder ops;
  DualPipeVBuilder b(ops);
  const int s0 = rank;                  // going down the V
  const int s1 = 2 * ranks - 1 - rank;  // coming back up
  const auto F = ActionKind::Forward;
  const auto I = ActionKind::BackwardInput;
  const auto B = ActionKind::FullBackward;

  // Step 1: nF0.
  for (int i = 0; i < (ranks - rank - 1) * 2; ++i) b.add(s0, F);
  // Step 2: nF0F1.
  for (int i = 0; i < rank + 1; ++i) {
    b.add(s0, F);
    b.add(s1, F);
  }
  // Step 3: nI1W1F1 (zero bubble).
  for (int i = 0; i < ranks - rank - 1; ++i) {
    b.add(s1, I);
    b.add_pending_weight();
    b.add(s1, F);
  }
  // Step 4 (main): nF0B1F1B0, overlapped; the last rank keeps its first pair apart.
  for (int i = 0; i < chunks - ranks * 2 + rank + 1; ++i) {
    if (i == 0 && rank == ranks - 1) {
      b.add(s0, F);
      b.add(s1, B);
    } else {
      b.add_overlap(s0, s1);
    }
    b.add_overlap(s1, s0);
  }
  // Step 5: nB1F1B0.
  for (int i = 0; i < ranks - rank - 1; ++i) {
    b.add(s1, B);
    b.add_overlap(s1, s0);
  }
  // Step 6: nB1B0, the second half with zero bubble (I now, W later).
  const int step6 = rank + 1;
  bool zero_bubble = false;
  for (int i = 0; i < step6; ++i) {
    if (i == step6 / 2 && rank % 2 == 1) zero_bubble = true;
    b.add(s1, zero_bubble ? I : B);
    if (i == step6 / 2 && rank % 2 == 0) zero_bubble = true;
    b.add(s0, zero_bubble ? I : B);
  }
  // Step 7: nWB0.
  for (int i = 0; i < ranks - rank - 1; ++i) {
    b.add_pending_weight();
    b.add(s0, zero_bubble ? I : B);
  }
  // Step 8: nW.
  for (int i = 0; i < rank + 1; ++i) b.add_pending_weight();
  return ops;
}

}  // namespace

PipelineOrder dualpipev_order(int ranks, int n_microbatches) {
  detail::check_sizes("DualPipeV", ranks, 2, n_microbatches);
  if (n_microbatches < 2 * ranks) {
    throw std::invalid_argument(
        "DualPipeV requires at least as many microbatches as stages, but got " +
        std::to_string(n_microbatches) + " microbatches and " + std::to_string(2 * ranks) +
        " stages (2 per rank); use at least " + std::to_string(2 * ranks) + " microbatches");
  }
  PipelineOrder order(ranks);
  for (int rank = 0; rank < ranks; ++rank)
    order[rank] = dualpipev_rank_ops(rank, ranks, n_microbatches);
  return order;
}

}  // namespace tensorplay::schedules
