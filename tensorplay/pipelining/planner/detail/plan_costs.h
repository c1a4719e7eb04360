// The planner's model of one configuration: its simulator cost model, its bytes per rank, and the
// words for why it lost. Private to the planner.
#pragma once

#include <string>
#include <vector>

#include "tensorplay/pipelining/planner/plan_request.h"
#include "tensorplay/pipelining/planner/profile.h"
#include "tensorplay/schedules/cost_model.h"
#include "tensorplay/schedules/memory_costs.h"

namespace tensorplay::pipelining::detail {

/// What every configuration of one search shares.
struct PlanContext {
  int64_t batch = 1;
  double memory_cap = 0;
  ChannelProfile channel;
  int cores = 1;
  int ranks_per_host = 1;
  std::vector<int> thread_options;  ///< product threads per stage actor to try
  bool one_process = true;
};

/// Checks the request and derives the context; throws std::invalid_argument naming what is bad.
PlanContext make_context(const Profile& profile, const PlanRequest& request);

/// Throws std::invalid_argument unless `choice`'s stages cover the profile's segments in order.
void check_choice(const Profile& profile, const PlanChoice& choice);

/// Per segment: F + B, the weight the balanced cut evens out.
std::vector<double> segment_costs(const Profile& profile);
/// Equal numbers of segments per stage (train_gpt's own cut).
std::vector<int> even_stage_begins(int segments, int stages);

/// The simulator's costs of `choice`: times in seconds, and memory_costs() as its memory.
schedules::CostModel cost_model(const Profile& profile, const PlanContext& context,
                                const PlanChoice& choice);
/// One microbatch's transfers between ranks over its compute (all stages, F and backward).
double transfer_share(const schedules::CostModel& costs, const std::vector<int>& stage_to_rank);
/// The simulator's memory costs of `choice` (its predict_memory replays them): per stage the
/// activation bytes one microbatch's F keeps (with and without recomputation, scaled to the
/// microbatch), all of it kept for W (the profile does not measure less), and the parameter,
/// gradient and optimizer bytes as fixed bytes.
schedules::MemoryCosts memory_costs(const Profile& profile, const PlanContext& context,
                                    const PlanChoice& choice);

/// The optimizer step after the pipeline's: every stage's in one process, else the slowest
/// rank's own stages.
double optimizer_seconds(const Profile& profile, const PlanContext& context,
                         const PlanChoice& choice, const std::vector<int>& stage_to_rank);

/// Why `c` lost to `best`: "+12.0% step: bubble 23.0% vs 8.0%", or communication, or compute.
std::string why_slower(const PlanChoice& c, const PlanChoice& best);

}  // namespace tensorplay::pipelining::detail
