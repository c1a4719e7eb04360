// Order generators: for each schedule, every rank's ordered compute actions (bubbles left out),
// matching PyTorch's torch.distributed.pipelining `pipeline_order`.
#pragma once

#include "tensorplay/schedules/action.h"

namespace tensorplay::schedules {

/// GPipe: all forwards, then all full backwards. One stage per rank.
PipelineOrder gpipe_order(int ranks, int n_microbatches);

/// 1F1B: warmup forwards, steady one-forward-one-backward, cooldown backwards. Needs m >= p.
PipelineOrder one_f_one_b_order(int ranks, int n_microbatches);
/// Row `rank` of one_f_one_b_order, alone: a very large pipeline can build each rank's policy
/// from its row while the row is still in cache, never holding the whole order.
RankOrder one_f_one_b_rank_order(int ranks, int rank, int n_microbatches);

/// Interleaved 1F1B (Megatron, depth first) with loop placement: stage s on rank s % p.
/// Needs m divisible by max(1, m / p).
PipelineOrder interleaved_1f1b_order(int ranks, int stages_per_rank, int n_microbatches);

/// Looped BFS (breadth first): each local stage runs every microbatch before the next stage.
PipelineOrder looped_bfs_order(int ranks, int stages_per_rank, int n_microbatches);

/// Interleaved zero bubble (ZB1P; ZB-H1 with one stage per rank): split backward, W fills bubbles.
/// Needs m divisible by max(1, m / p).
PipelineOrder interleaved_zero_bubble_order(int ranks, int stages_per_rank, int n_microbatches);

/// ZB-V zero bubble: two stages per rank in V placement (rank r holds r and 2p-1-r).
PipelineOrder zbv_zero_bubble_order(int ranks, int n_microbatches);

/// DualPipeV: two stages per rank in V placement, overlapped F/B pairs. Needs m >= 2p.
PipelineOrder dualpipev_order(int ranks, int n_microbatches);

/// V-Half (Qi et al., "Pipeline Parallelism with Controllable Memory"): V placement, split
/// backward, one microbatch's actions as a block repeated every 6 slots; about half of 1F1B's
/// peak activations (p stage activations of half a rank's share, against 1F1B's p whole ones).
PipelineOrder vhalf_order(int ranks, int n_microbatches);

/// V-Min: as V-Half with the block that holds the fewest activations, about a third of 1F1B's
/// as p grows (at most 0.4 from p = 8), for a larger bubble.
PipelineOrder vmin_order(int ranks, int n_microbatches);

}  // namespace tensorplay::schedules
