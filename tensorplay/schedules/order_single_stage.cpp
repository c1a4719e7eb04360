// GPipe and 1F1B: the one-stage-per-rank schedules (PyTorch's PipelineScheduleSingle family).
#include <stdexcept>
#include <string>

#include "tensorplay/schedules/detail/generator_checks.h"
#include "tensorplay/schedules/generators.h"

namespace tensorplay::schedules {

PipelineOrder gpipe_order(int ranks, int n_microbatches) {
  detail::check_sizes("GPipe", ranks, 1, n_microbatches);
  PipelineOrder order(ranks);
  for (int rank = 0; rank < ranks; ++rank) {
    RankOrder& ops = order[rank];
    ops.reserve(2 * static_cast<std::size_t>(n_microbatches));
    // Fill: every forward.
    for (int mb = 0; mb < n_microbatches; ++mb) {
      ops.push_back(make_action(rank, ActionKind::Forward, mb));
    }
    // Drain: every full backward.
    for (int mb = 0; mb < n_microbatches; ++mb) {
      ops.push_back(make_action(rank, ActionKind::FullBackward, mb));
    }
  }
  return order;
}

namespace {

void check_one_f_one_b(int ranks, int n_microbatches) {
  detail::check_sizes("1F1B", ranks, 1, n_microbatches);
  if (n_microbatches < ranks) {
    throw std::invalid_argument("1F1B needs at least as many microbatches as stages, got " +
                                std::to_string(n_microbatches) + " microbatches and " +
                                std::to_string(ranks) +
                                " stages; raise the microbatch count or use GPipe");
  }
}

// One rank's 1F1B order, sizes already checked.
RankOrder one_f_one_b_row(int ranks, int rank, int n_microbatches) {
  RankOrder ops;
  ops.reserve(2 * static_cast<std::size_t>(n_microbatches));
  int forward_mb = 0;
  int backward_mb = 0;
  // Warmup: one forward per hop to the last stage.
  int warmup = ranks - 1 - rank;
  for (int i = 0; i < warmup; ++i) {
    ops.push_back(make_action(rank, ActionKind::Forward, forward_mb++));
  }
  // Steady state: one forward, one backward.
  while (forward_mb < n_microbatches) {
    ops.push_back(make_action(rank, ActionKind::Forward, forward_mb++));
    ops.push_back(make_action(rank, ActionKind::FullBackward, backward_mb++));
  }
  // Cooldown: the remaining backwards.
  while (backward_mb < n_microbatches) {
    ops.push_back(make_action(rank, ActionKind::FullBackward, backward_mb++));
  }
  return ops;
}

}  // namespace

PipelineOrder one_f_one_b_order(int ranks, int n_microbatches) {
  check_one_f_one_b(ranks, n_microbatches);
  PipelineOrder order(ranks);
  for (int rank = 0; rank < ranks; ++rank) order[rank] = one_f_one_b_row(ranks, rank, n_microbatches);
  return order;
}

RankOrder one_f_one_b_rank_order(int ranks, int rank, int n_microbatches) {
  check_one_f_one_b(ranks, n_microbatches);
  if (rank < 0 || rank >= ranks)
    throw std::invalid_argument("1F1B: rank " + std::to_string(rank) + " is not in [0, " +
                                std::to_string(ranks) + ")");
  return one_f_one_b_row(ranks, rank, n_microbatches);
}

}  // namespace tensorplay::schedules
