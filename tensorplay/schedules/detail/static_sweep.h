// The simulator's path for static orders: a rank following a static order starts each action as
// soon as it is free and the action's inputs have arrived, so a step's times follow from one
// sweep over the orders, with no event queue. Private to the simulator (simulator.cpp).
#pragma once

#include <optional>
#include <vector>

#include "tensorplay/schedules/detail/static_order_policy.h"
#include "tensorplay/schedules/detail/step_costs.h"
#include "tensorplay/schedules/simulation_result.h"

namespace tensorplay::schedules::detail {

/// What the sweep finds for one rank (as the event loop's RankState counts it).
struct SweepRank {
  double busy = 0.0;
  double first_start = -1.0;  // -1: ran nothing
  double last_end = 0.0;
  int peak = 0;  // most activations held at once
};

struct SweepOutcome {
  std::vector<SweepRank> ranks;
  std::size_t actions = 0;
  std::vector<TimelineEvent> timeline;  // in completion order per rank, when recorded
};

/// Every action's start is max(the rank's previous end, its inputs' arrivals), an end is start +
/// duration, an arrival is the producer's end + the transfer time when the producer is on another
/// rank: the event loop's times, to the bit. Empty when the orders cannot finish (an action that
/// never becomes ready, or one outside the pipeline): the event loop then names what each rank
/// waits for.
std::optional<SweepOutcome> sweep_static_orders(const std::vector<StaticOrderPolicy*>& orders,
                                                const std::vector<int>& stage_to_rank,
                                                int n_microbatches, const StepCosts& costs,
                                                bool record_timeline);

}  // namespace tensorplay::schedules::detail
