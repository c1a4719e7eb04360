// ZB-V zero bubble (Zero Bubble paper, section 6): two stages per rank in V placement. Rank r
// holds chunk 0 = stage r (going down the V) and chunk 1 = stage 2p-1-r (coming back up).
#include <algorithm>

#include "tensorplay/schedules/detail/generator_checks.h"
#include "tensorplay/schedules/generators.h"

namespace tensorplay::schedules {
namespace {

RankOrder zbv_rank_ops(int rank, int ranks, int n_microbatches) {
  // The phases assume at least 2p-1 microbatches; extra ones are dropped at the end.
  const int n = std::max(2 * ranks - 1, n_microbatches);
  const int chunk0 = rank;
  const int chunk1 = 2 * ranks - 1 - rank;
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  RankOrder ops;
  auto add = [&](int stage, ActionKind kind, int mb) {
    ops.push_back(make_action(stage, kind, mb));
  };

  // Warmup 1: chunk 0 forwards until the V's tip is reached.
  for (int i = 0; i < 2 * (ranks - rank) - 1; ++i) add(chunk0, ActionKind::Forward, f0++);
  // Warmup 2: alternate chunk 1 and chunk 0 forwards.
  for (int i = 0; i < rank; ++i) {
    add(chunk1, ActionKind::Forward, f1++);
    add(chunk0, ActionKind::Forward, f0++);
  }
  // Warmup 3: chunk 1 forward, then its I and W at once.
  for (int i = 0; i < ranks - rank; ++i) {
    add(chunk1, ActionKind::Forward, f1);
    add(chunk1, ActionKind::BackwardInput, b1);
    add(chunk1, ActionKind::BackwardWeight, b1);
    ++f1;
    ++b1;
  }
  // Stable: F0 I0 W0 F1 I1 W1.
  while (f1 < f0 || f0 < n) {
    if (f0 < n) add(chunk0, ActionKind::Forward, f0++);
    add(chunk0, ActionKind::BackwardInput, b0);
    add(chunk0, ActionKind::BackwardWeight, b0);
    ++b0;
    add(chunk1, ActionKind::Forward, f1++);
    add(chunk1, ActionKind::BackwardInput, b1);
    add(chunk1, ActionKind::BackwardWeight, b1);
    ++b1;
  }
  // Cooldown 1: I0 I1 pairs, weights deferred.
  int w0 = b0, w1 = b1;
  for (int i = 0; i < rank; ++i) {
    add(chunk0, ActionKind::BackwardInput, b0++);
    add(chunk1, ActionKind::BackwardInput, b1++);
  }
  // Cooldown 2: I0 W0 pairs.
  for (int i = 0; i < ranks - rank; ++i) {
    add(chunk0, ActionKind::BackwardInput, b0++);
    add(chunk0, ActionKind::BackwardWeight, w0++);
  }
  // Cooldown 3: the deferred weights, chunk 1 first.
  while (w1 < b1) add(chunk1, ActionKind::BackwardWeight, w1++);
  while (w0 < b0) add(chunk0, ActionKind::BackwardWeight, w0++);

  std::erase_if(ops, [&](const Action& a) { return a.microbatch >= n_microbatches; });
  return ops;
}

}  // namespace

PipelineOrder zbv_zero_bubble_order(int ranks, int n_microbatches) {
  detail::check_sizes("ZBVZeroBubble", ranks, 2, n_microbatches);
  PipelineOrder order(ranks);
  for (int rank = 0; rank < ranks; ++rank) order[rank] = zbv_rank_ops(rank, ranks, n_microbatches);
  return order;
}

}  // namespace tensorplay::schedules
