// What the planner is asked (PlanRequest) and what it answers (PlanChoice for one configuration,
// PlanResult for a search): plain values shared by the search, its cost model and plan files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorplay/pipelining/planner/profile.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/schedules/simulator.h"

namespace tensorplay::pipelining {

/// What the planner searches over.
struct PlanRequest {
  int world = 2;          ///< ranks of the pipeline
  double memory_cap = 0;  ///< bytes per rank; 0: no cap
  int64_t batch = 0;      ///< samples per step (microbatch counts divide it)
  /// Schedules to try; empty: every built-in schedule.
  std::vector<schedules::ScheduleKind> schedules;
  /// Stages per rank tried by the multi-stage schedules (single-stage ones use 1, V ones 2).
  std::vector<int> stages_per_rank = {2, 3, 4};
  int max_microbatches = 64;  ///< microbatch counts above it are not tried
  /// The profile's channel between ranks; empty: the one plan_channel() picks for the request.
  std::string channel;
  int cores = 0;              ///< cores of a host; 0: the profile's
  int ranks_per_host = 0;     ///< 0: every rank on one host (the embedded runtime)
  bool try_recompute = true;  ///< also try recomputation (everywhere, and where memory needs it)
  bool try_threads = true;    ///< also try fewer product threads per stage than the share
  /// Every rank in one process (the embedded runtime): one optimizer steps all stages after the
  /// pipeline's step. false: each rank's process steps its own stages, at the same time.
  bool one_process = true;
};

/// One configuration and what the simulator predicts for it.
struct PlanChoice {
  schedules::ScheduleKind schedule = schedules::ScheduleKind::OneFOneB;
  int ranks = 1;
  int stages_per_rank = 1;
  int n_microbatches = 1;
  std::vector<int> stage_begin;  ///< per stage: the profile segment it begins at (first: 0)
  std::vector<bool> recompute;   ///< per stage
  int threads = 1;               ///< product threads of each stage actor
  std::string cut;               ///< "balanced" (on measured time) or "even" (segment counts)

  double step_seconds = 0;       ///< predicted: the pipeline's step, then the optimizer's
  double optimizer_seconds = 0;  ///< predicted: the optimizer's part of step_seconds
  double bubble = 0;             ///< idle share of ranks x the pipeline's step
  double transfer_share = 0;     ///< transfer time of one microbatch's hops / its compute
  /// Per rank: what the simulator's memory model (schedules::predict_memory) predicts: its
  /// stages' parameters, gradients and optimizer state plus the most activation bytes held at
  /// once (zeros when the profile has no bytes). The memory cap filters on these.
  std::vector<double> peak_bytes;
  bool feasible = true;  ///< false: over the cap, or the schedule refused the sizes
  std::string why;       ///< why it lost (empty for the best)

  int num_stages() const { return ranks * stages_per_rank; }
  double max_peak_bytes() const;
  /// "1F1B, 2 ranks x 1 stage, 8 microbatches, cut balanced, recompute none, 1 thread" (a
  /// configuration refused before its cut: the schedule, sizes and microbatches only).
  std::string describe() const;
};

/// Every configuration evaluated: feasible ones by predicted step time, then the others.
struct PlanResult {
  std::vector<PlanChoice> ranked;
  std::string channel;  ///< the profile's channel the transfers were timed with
  size_t configs = 0;   ///< configurations simulated
  double seconds = 0;   ///< time the search took
  /// The fastest feasible configuration; throws std::runtime_error (with the reasons) when none.
  const PlanChoice& best() const;
};

/// The profile's channel that plan(), predict() and simulate_choice() time transfers with:
/// request.channel when named (std::invalid_argument listing the profile's channels when it lacks
/// it). Else, for ranks of one process (one_process), "in_process"; for ranks in separate
/// processes, "ucx_shm" when they share a host (ranks_per_host 0 or at least world) and "ucx_tcp"
/// when they do not, each falling back to the other. A profile without the wanted channels (one
/// measured before the UCX channels were) gives its first; one without channels, a free channel.
ChannelProfile plan_channel(const Profile& profile, const PlanRequest& request);

}  // namespace tensorplay::pipelining
