// Which building block V-Half and V-Min repeat: chosen from the shapes of v_block.h by what the
// block holds and how fast its repetition runs on the job's rank and microbatch counts.
#pragma once

#include "tensorplay/schedules/detail/v_block.h"

namespace tensorplay::schedules::detail {

/// What a memory-controlled V schedule aims for.
enum class VMemoryGoal {
  Half,  ///< the fastest block holding at most max(p, V-Min's) stage activations (1F1B: 2p)
  Min,   ///< the block holding the fewest stage activations, then the fastest
};

/// The block `goal` chooses for `ranks` ranks running `microbatches` microbatches (timed over at
/// most 2p of them; computed once per rank count, timed count and goal).
VBlock chosen_v_block(int ranks, int n_microbatches, VMemoryGoal goal);

}  // namespace tensorplay::schedules::detail
