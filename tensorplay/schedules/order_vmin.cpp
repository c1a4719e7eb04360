// V-Min ("Pipeline Parallelism with Controllable Memory", Qi et al. 2024): two stages per rank in
// V placement, each microbatch's F, I and W laid out as one block repeated every 6 slots, the
// block holding the fewest activations: about a third of 1F1B's as p grows.
#include "tensorplay/schedules/detail/generator_checks.h"
#include "tensorplay/schedules/detail/v_block_choice.h"
#include "tensorplay/schedules/generators.h"

namespace tensorplay::schedules {

PipelineOrder vmin_order(int ranks, int n_microbatches) {
  detail::check_sizes("VMin", ranks, 2, n_microbatches);
  return detail::repeat_v_block(
      detail::chosen_v_block(ranks, n_microbatches, detail::VMemoryGoal::Min), n_microbatches);
}

}  // namespace tensorplay::schedules
