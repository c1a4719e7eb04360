// The building block of the memory-controlled V schedules (Qi et al., "Pipeline Parallelism with
// Controllable Memory"): one microbatch's F, I and W on every stage of the V, repeated per slot.
#pragma once

#include <vector>

#include "tensorplay/schedules/action.h"

namespace tensorplay::schedules::detail {

/// Slots between a block's repetitions: a rank runs 6 actions per microbatch (F, I, W on each of
/// its two stages), each one slot long.
inline constexpr int kVBlockPeriod = 6;

/// How a block is laid out: each action goes to the first slot at or after its earliest one that
/// its rank does not use (modulo the period), so the repeated block never overlaps on a rank.
struct VBlockShape {
  std::vector<int> forward_gaps = {1};  ///< slots from one stage's F to the next's, cycled
  int input_gap = 1;                    ///< slots from one stage's I to the previous stage's
  int backward_delay = 0;               ///< extra slots between the last F and the first I
  int weight_delay = 0;                 ///< extra slots between a stage's I and its W
};

/// A placed block for `ranks` ranks in V placement: the slot of each stage's F, I and W.
struct VBlock {
  int ranks = 0;
  std::vector<int> forward, input, weight;  ///< index: stage (2 * ranks of them)
};

/// What a block's repetition holds in its steady state, the most on any rank.
struct VBlockPeaks {
  int kept = 0;     ///< stage activations held from F's start to I's end
  int stashed = 0;  ///< the same to W's end (the simulator's peak_activations)
};

/// Places one microbatch's actions as `shape` says.
VBlock place_v_block(int ranks, const VBlockShape& shape);
/// Every rank's order: microbatch j's actions at their block slot + 6 j, in slot order.
PipelineOrder repeat_v_block(const VBlock& block, int n_microbatches);
/// The peaks of the block repeated over enough microbatches to reach its steady state.
VBlockPeaks v_block_peaks(const VBlock& block);
/// The step time of the block repeated over `microbatches` microbatches, each action run as soon
/// as its input is there: replayed with F = I = W = 1, with I = 1.5 and W = 0.5 (a weight
/// gradient cheaper than an input gradient, as in most models) and with a latency of 0.5 per
/// hand-over between ranks, added up.
double v_block_time(const VBlock& block, int n_microbatches);
/// The shapes the V-Half and V-Min generators choose from (a few forward gap patterns, input
/// gaps, backward and weight delays).
std::vector<VBlockShape> v_block_shapes();

}  // namespace tensorplay::schedules::detail
