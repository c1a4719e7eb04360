// V-Half ("Pipeline Parallelism with Controllable Memory", Qi et al. 2024): two stages per rank
// in V placement, each microbatch's F, I and W laid out as one block repeated every 6 slots, the
// fastest block holding about half of 1F1B's activations (p stage activations against 2p).
#include "tensorplay/schedules/detail/generator_checks.h"
#include "tensorplay/schedules/detail/v_block_choice.h"
#include "tensorplay/schedules/generators.h"

namespace tensorplay::schedules {

PipelineOrder vhalf_order(int ranks, int n_microbatches) {
  detail::check_sizes("VHalf", ranks, 2, n_microbatches);
  return detail::repeat_v_block(
      detail::chosen_v_block(ranks, n_microbatches, detail::VMemoryGoal::Half), n_microbatches);
}

}  // namespace tensorplay::schedules
