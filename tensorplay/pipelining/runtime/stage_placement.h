// Where a schedule's stages run: how many ranks, which rank hosts each stage, and each rank's order
// of compute actions. Pure: every rank computes the same placement from the same counts.
#pragma once

#include <string>
#include <vector>

#include "tensorplay/schedules/action.h"
#include "tensorplay/schedules/schedule_kind.h"

namespace tensorplay::pipelining {

/// A schedule's placement of stages on ranks and its per-rank order.
struct StagePlacement {
  int num_stages = 0;
  int ranks = 0;
  int stages_per_rank = 1;
  /// Each rank's compute actions (generated, or the order given).
  schedules::PipelineOrder order;
  /// The rank hosting each stage, by stage index.
  std::vector<int> stage_to_rank;

  /// The stage indices rank `rank` hosts, ascending.
  std::vector<int> stages_of(int rank) const;
};

/// The placement of `num_stages` stages under `kind` with `stages_per_rank` per rank (0: the
/// schedule's default; schedules of one stage per rank ignore it) and `n_microbatches`
/// microbatches; `given_order` (not empty) replaces the generated order after it is checked
/// against the placement. Throws std::invalid_argument (or schedules::ScheduleError for an order
/// that cannot run) naming the schedule.
StagePlacement place_stages(schedules::ScheduleKind kind, int num_stages, int n_microbatches,
                            int stages_per_rank = 0,
                            const schedules::PipelineOrder& given_order = {});

/// The forward-only part of a rank's order (what eval runs).
schedules::RankOrder forward_only(const schedules::RankOrder& order);

}  // namespace tensorplay::pipelining
