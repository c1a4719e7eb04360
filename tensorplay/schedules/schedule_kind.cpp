#include "tensorplay/schedules/schedule_kind.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string>

#include "tensorplay/schedules/generators.h"

namespace tensorplay::schedules {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

const std::vector<ScheduleKind>& all_schedule_kinds() {
  static const std::vector<ScheduleKind> kinds = {ScheduleKind::GPipe,
                                                  ScheduleKind::OneFOneB,
                                                  ScheduleKind::Interleaved1F1B,
                                                  ScheduleKind::LoopedBFS,
                                                  ScheduleKind::InterleavedZeroBubble,
                                                  ScheduleKind::ZBVZeroBubble,
                                                  ScheduleKind::DualPipeV,
                                                  ScheduleKind::VHalf,
                                                  ScheduleKind::VMin};
  return kinds;
}

std::string_view schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::GPipe:
      return "GPipe";
    case ScheduleKind::OneFOneB:
      return "1F1B";
    case ScheduleKind::Interleaved1F1B:
      return "Interleaved1F1B";
    case ScheduleKind::LoopedBFS:
      return "LoopedBFS";
    case ScheduleKind::InterleavedZeroBubble:
      return "InterleavedZeroBubble";
    case ScheduleKind::ZBVZeroBubble:
      return "ZBVZeroBubble";
    case ScheduleKind::DualPipeV:
      return "DualPipeV";
    case ScheduleKind::VHalf:
      return "VHalf";
    case ScheduleKind::VMin:
      return "VMin";
  }
  return "?";
}

ScheduleKind parse_schedule_kind(std::string_view name) {
  std::string wanted = lower(name);
  std::string valid;
  for (ScheduleKind kind : all_schedule_kinds()) {
    if (lower(schedule_name(kind)) == wanted) return kind;
    valid += valid.empty() ? "" : ", ";
    valid += schedule_name(kind);
  }
  throw std::invalid_argument("Unknown schedule name '" + std::string(name) +
                              "'. The valid options are " + valid + " (case-insensitive)");
}

bool is_single_stage_per_rank(ScheduleKind kind) {
  return kind == ScheduleKind::GPipe || kind == ScheduleKind::OneFOneB;
}

bool uses_split_backward(ScheduleKind kind) {
  return kind == ScheduleKind::InterleavedZeroBubble || kind == ScheduleKind::ZBVZeroBubble ||
         kind == ScheduleKind::DualPipeV || kind == ScheduleKind::VHalf ||
         kind == ScheduleKind::VMin;
}

Placement placement_of(ScheduleKind kind) {
  const bool v = kind == ScheduleKind::ZBVZeroBubble || kind == ScheduleKind::DualPipeV ||
                 kind == ScheduleKind::VHalf || kind == ScheduleKind::VMin;
  return v ? Placement::V : Placement::Loop;
}

int default_stages_per_rank(ScheduleKind kind) { return is_single_stage_per_rank(kind) ? 1 : 2; }

std::vector<int> stage_to_rank(Placement placement, int ranks, int stages_per_rank) {
  if (ranks < 1 || stages_per_rank < 1) {
    throw std::invalid_argument("stage placement needs ranks >= 1 and stages_per_rank >= 1, got " +
                                std::to_string(ranks) + " and " + std::to_string(stages_per_rank));
  }
  if (placement == Placement::V && stages_per_rank != 2) {
    throw std::invalid_argument("V placement holds exactly 2 stages per rank, got " +
                                std::to_string(stages_per_rank));
  }
  std::vector<int> ranks_of(static_cast<std::size_t>(ranks) * stages_per_rank);
  for (int stage = 0; stage < static_cast<int>(ranks_of.size()); ++stage) {
    ranks_of[stage] =
        placement == Placement::Loop || stage < ranks ? stage % ranks : 2 * ranks - 1 - stage;
  }
  return ranks_of;
}

std::vector<int> stage_to_rank(ScheduleKind kind, int ranks, int stages_per_rank) {
  std::string name(schedule_name(kind));
  if (is_single_stage_per_rank(kind) && stages_per_rank != 1) {
    throw std::invalid_argument(name + " runs exactly 1 stage per rank, got " +
                                std::to_string(stages_per_rank) +
                                "; use Interleaved1F1B or LoopedBFS for more");
  }
  if (placement_of(kind) == Placement::V && stages_per_rank != 2) {
    throw std::invalid_argument(name + " requires exactly 2 stages per rank, but got " +
                                std::to_string(stages_per_rank));
  }
  return stage_to_rank(placement_of(kind), ranks, stages_per_rank);
}

PipelineOrder generate_order(ScheduleKind kind, int ranks, int stages_per_rank, int n_microbatches) {
  stage_to_rank(kind, std::max(ranks, 1), stages_per_rank);  // checks stages_per_rank
  switch (kind) {
    case ScheduleKind::GPipe:
      return gpipe_order(ranks, n_microbatches);
    case ScheduleKind::OneFOneB:
      return one_f_one_b_order(ranks, n_microbatches);
    case ScheduleKind::Interleaved1F1B:
      return interleaved_1f1b_order(ranks, stages_per_rank, n_microbatches);
    case ScheduleKind::LoopedBFS:
      return looped_bfs_order(ranks, stages_per_rank, n_microbatches);
    case ScheduleKind::InterleavedZeroBubble:
      return interleaved_zero_bubble_order(ranks, stages_per_rank, n_microbatches);
    case ScheduleKind::ZBVZeroBubble:
      return zbv_zero_bubble_order(ranks, n_microbatches);
    case ScheduleKind::DualPipeV:
      return dualpipev_order(ranks, n_microbatches);
    case ScheduleKind::VHalf:
      return vhalf_order(ranks, n_microbatches);
    case ScheduleKind::VMin:
      return vmin_order(ranks, n_microbatches);
  }
  throw std::invalid_argument("unknown schedule kind");
}

}  // namespace tensorplay::schedules
