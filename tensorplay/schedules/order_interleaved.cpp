// Loop-placed multi-stage schedules: Interleaved 1F1B (Megatron), Looped BFS and Interleaved Zero
// Bubble (ZB1P). Stage s lives on rank s % p; rank r's local stages are r, r+p, r+2p, ...
#include <algorithm>
#include <functional>
#include <vector>

#include "tensorplay/schedules/detail/generator_checks.h"
#include "tensorplay/schedules/generators.h"

namespace tensorplay::schedules {
namespace {

// The three phases of an interleaved rank's work, counted in stage passes.
struct Phases {
  int warmup = 0;    // forwards before the first backward
  int steady = 0;    // forward+backward pairs
  int cooldown = 0;  // backwards after the last forward
};

// Warmup forwards: the last rank fills (local_stages - 1) rounds, each hop before it two more
// (1F1B: F and B of a hop) or one more (zero bubble: only F must wait), capped at all its work.
Phases interleaved_phases(int rank, int ranks, int local_stages, int per_round, int n_microbatches,
                          int hop_factor) {
  int last_rank_warmup = (local_stages - 1) * per_round;
  int total = local_stages * n_microbatches;
  Phases phases;
  phases.warmup = std::min(last_rank_warmup + hop_factor * (ranks - 1 - rank), total);
  phases.steady = total - phases.warmup;
  phases.cooldown = total - phases.steady;
  return phases;
}

// Emits one rank's actions for interleaved 1F1B, or for ZB1P when `zero_bubble` (I instead of B,
// plus W passes that start after `delayed_weights` backward passes and trail the I passes).
RankOrder interleaved_rank_ops(int rank, int ranks, int local_stages, int per_round,
                               const Phases& phases, bool zero_bubble, int delayed_weights) {
  // Local stage of the forward / backward at operation `op`: round-robin over rounds, backward
  // walking the local stages from last to first.
  auto forward_stage = [&](int op) { return ((op / per_round) % local_stages) * ranks + rank; };
  auto backward_stage = [&](int op) {
    int local = local_stages - 1 - ((op - phases.warmup) / per_round) % local_stages;
    return local * ranks + rank;
  };
  const ActionKind backward_kind =
      zero_bubble ? ActionKind::BackwardInput : ActionKind::FullBackward;
  const int num_stages = ranks * local_stages;
  std::vector<int> next_forward(num_stages, 0);
  std::vector<int> next_backward(num_stages, 0);
  std::vector<int> next_weight(num_stages, 0);
  std::vector<int> backward_ops;  // op ids of backwards, in order, for the W that follows each
  std::size_t weights_done = 0;

  RankOrder ops;
  auto add_forward = [&](int op) {
    int stage = forward_stage(op);
    ops.push_back(make_action(stage, ActionKind::Forward, next_forward[stage]++));
  };
  auto add_backward = [&](int op) {
    int stage = backward_stage(op);
    ops.push_back(make_action(stage, backward_kind, next_backward[stage]++));
    backward_ops.push_back(op);
  };
  auto add_weight = [&]() {
    int stage = backward_stage(backward_ops[weights_done++]);
    ops.push_back(make_action(stage, ActionKind::BackwardWeight, next_weight[stage]++));
  };

  const int total = phases.warmup + phases.steady + phases.cooldown;
  for (int op = 0; op < total; ++op) {
    if (op < phases.warmup) {
      // Warmup: forwards only.
      add_forward(op);
    } else if (op < phases.warmup + phases.steady) {
      // Steady: one forward, one backward (and, for zero bubble, one delayed weight pass).
      add_forward(op);
      add_backward(op);
      if (zero_bubble && op - phases.warmup >= delayed_weights) add_weight();
    } else {
      // Cooldown: backwards (and delayed weight passes).
      add_backward(op);
      if (zero_bubble && op - phases.warmup >= delayed_weights) add_weight();
    }
  }
  // Remaining weight passes.
  while (zero_bubble && weights_done < backward_ops.size()) add_weight();
  return ops;
}

}  // namespace

PipelineOrder interleaved_1f1b_order(int ranks, int stages_per_rank, int n_microbatches) {
  detail::check_sizes("Interleaved1F1B", ranks, stages_per_rank, n_microbatches);
  int per_round = detail::microbatches_per_round("Interleaved1F1B", ranks, n_microbatches);
  PipelineOrder order(ranks);
  for (int rank = 0; rank < ranks; ++rank) {
    Phases phases = interleaved_phases(rank, ranks, stages_per_rank, per_round, n_microbatches, 2);
    order[rank] = interleaved_rank_ops(rank, ranks, stages_per_rank, per_round, phases, false, 0);
  }
  return order;
}

PipelineOrder interleaved_zero_bubble_order(int ranks, int stages_per_rank, int n_microbatches) {
  detail::check_sizes("InterleavedZeroBubble", ranks, stages_per_rank, n_microbatches);
  int per_round = detail::microbatches_per_round("InterleavedZeroBubble", ranks, n_microbatches);
  PipelineOrder order(ranks);
  for (int rank = 0; rank < ranks; ++rank) {
    Phases phases = interleaved_phases(rank, ranks, stages_per_rank, per_round, n_microbatches, 1);
    // Rank r runs r backward passes before its first weight pass: the W fills its bubble.
    order[rank] = interleaved_rank_ops(rank, ranks, stages_per_rank, per_round, phases, true, rank);
  }
  return order;
}

PipelineOrder looped_bfs_order(int ranks, int stages_per_rank, int n_microbatches) {
  detail::check_sizes("LoopedBFS", ranks, stages_per_rank, n_microbatches);
  PipelineOrder order(ranks);
  for (int rank = 0; rank < ranks; ++rank) {
    RankOrder& ops = order[rank];
    // Forward: each local stage, first to last, runs every microbatch.
    for (int local = 0; local < stages_per_rank; ++local) {
      for (int mb = 0; mb < n_microbatches; ++mb) {
        ops.push_back(make_action(local * ranks + rank, ActionKind::Forward, mb));
      }
    }
    // Backward: local stages last to first, microbatches last to first.
    for (int local = stages_per_rank - 1; local >= 0; --local) {
      for (int mb = n_microbatches - 1; mb >= 0; --mb) {
        ops.push_back(make_action(local * ranks + rank, ActionKind::FullBackward, mb));
      }
    }
  }
  return order;
}

}  // namespace tensorplay::schedules
