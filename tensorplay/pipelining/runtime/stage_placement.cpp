// The schedule's placement: the rank count, each stage's rank and each rank's order, from the
// schedule kind and the counts alone.
#include "tensorplay/pipelining/runtime/stage_placement.h"

#include <stdexcept>

#include "tensorplay/pipelining/runtime/detail/given_order.h"
#include "tensorplay/pipelining/runtime/schedule.h"

namespace tensorplay::pipelining {

using schedules::Action;
using schedules::ActionKind;

namespace {

/// Stages per rank under `kind` when `requested` were asked for (0: the schedule's default).
int resolve_stages_per_rank(schedules::ScheduleKind kind, int requested) {
  if (schedules::is_single_stage_per_rank(kind)) return 1;
  return requested > 0 ? requested : schedules::default_stages_per_rank(kind);
}

}  // namespace

std::vector<int> StagePlacement::stages_of(int rank) const {
  std::vector<int> out;
  for (int s = 0; s < static_cast<int>(stage_to_rank.size()); ++s)
    if (stage_to_rank[s] == rank) out.push_back(s);
  return out;
}

StagePlacement place_stages(schedules::ScheduleKind kind, int num_stages, int n_microbatches,
                            int stages_per_rank, const schedules::PipelineOrder& given_order) {
  const std::string name(schedules::schedule_name(kind));
  if (stages_per_rank < 0)
    throw std::invalid_argument(name +
                                ": ScheduleOptions::stages_per_rank must be 0 (the schedule's "
                                "default) or positive, got " +
                                std::to_string(stages_per_rank));
  StagePlacement p;
  p.num_stages = num_stages;
  p.stages_per_rank = resolve_stages_per_rank(kind, stages_per_rank);
  if (num_stages < 1 || num_stages % p.stages_per_rank != 0)
    throw std::invalid_argument(name + ": " + std::to_string(num_stages) +
                                " stages cannot be placed " + std::to_string(p.stages_per_rank) +
                                " per rank");
  if (n_microbatches < 1)
    throw std::invalid_argument(name + ": n_microbatches must be at least 1, got " +
                                std::to_string(n_microbatches));
  p.ranks = num_stages / p.stages_per_rank;
  p.order = schedules::generate_order(kind, p.ranks, p.stages_per_rank, n_microbatches);
  p.stage_to_rank = schedules::stage_to_rank(kind, p.ranks, p.stages_per_rank);
  if (!given_order.empty())
    p.order = detail::checked_order(name, given_order, num_stages, n_microbatches, p.stage_to_rank);
  return p;
}

schedules::RankOrder forward_only(const schedules::RankOrder& order) {
  schedules::RankOrder out;
  for (const Action& a : order) {
    if (a.kind == ActionKind::Forward) out.push_back(a);
    if (a.kind == ActionKind::OverlapFB)
      for (const Action& sub : a.sub_actions)
        if (sub.kind == ActionKind::Forward) out.push_back(sub);
  }
  return out;
}

std::vector<int> stages_of_rank(schedules::ScheduleKind kind, int rank, int num_stages,
                                int stages_per_rank) {
  const int spr = resolve_stages_per_rank(kind, stages_per_rank);
  if (num_stages < 1 || num_stages % spr != 0)
    throw std::invalid_argument("stages_of_rank: " + std::to_string(num_stages) +
                                " stages cannot be placed " + std::to_string(spr) + " per rank");
  int ranks = num_stages / spr;
  if (rank < 0 || rank >= ranks)
    throw std::invalid_argument("stages_of_rank: rank " + std::to_string(rank) +
                                " is out of range for " + std::to_string(ranks) + " ranks");
  std::vector<int> placement = schedules::stage_to_rank(kind, ranks, spr);
  std::vector<int> out;
  for (int s = 0; s < num_stages; ++s)
    if (placement[s] == rank) out.push_back(s);
  return out;
}

}  // namespace tensorplay::pipelining
