// Schedule registry: the named schedules, their stage placement, and one entry point that
// generates any of them (names parsed case-insensitively, like PyTorch's get_schedule_class).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tensorplay/schedules/action.h"

namespace tensorplay::schedules {

/// The built-in schedules.
enum class ScheduleKind {
  GPipe,
  OneFOneB,
  Interleaved1F1B,
  LoopedBFS,
  InterleavedZeroBubble,
  ZBVZeroBubble,
  DualPipeV,
  VHalf,  ///< memory-controlled V: about half of 1F1B's activations
  VMin,   ///< memory-controlled V: about a third of 1F1B's activations
};

/// How stages are laid out over ranks.
enum class Placement {
  Loop,  ///< stage s on rank s % p.
  V,     ///< rank r holds stages r and 2p-1-r.
};

/// Every kind, in the order listed above.
const std::vector<ScheduleKind>& all_schedule_kinds();
/// PyTorch's name: "GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble",
/// "ZBVZeroBubble", "DualPipeV", "VHalf", "VMin".
std::string_view schedule_name(ScheduleKind kind);
/// Case-insensitive inverse of schedule_name; throws std::invalid_argument listing valid names.
ScheduleKind parse_schedule_kind(std::string_view name);
/// True for GPipe and 1F1B (PipelineScheduleSingle in PyTorch).
bool is_single_stage_per_rank(ScheduleKind kind);
/// True when the schedule splits backward into I and W.
bool uses_split_backward(ScheduleKind kind);
/// Loop or V.
Placement placement_of(ScheduleKind kind);
/// Stages per rank the schedule uses when the caller has no preference: 1 for the single-stage
/// schedules, 2 for all others.
int default_stages_per_rank(ScheduleKind kind);

/// Stage index -> rank for `ranks * stages_per_rank` stages. Throws std::invalid_argument when the
/// schedule cannot use that many stages per rank (single-stage needs 1, V schedules need 2).
std::vector<int> stage_to_rank(ScheduleKind kind, int ranks, int stages_per_rank);
/// Loop placement (s % p) or V placement for `ranks * stages_per_rank` stages.
std::vector<int> stage_to_rank(Placement placement, int ranks, int stages_per_rank);

/// The order of `kind` for the given sizes (stages_per_rank is checked as in stage_to_rank).
PipelineOrder generate_order(ScheduleKind kind, int ranks, int stages_per_rank, int n_microbatches);

}  // namespace tensorplay::schedules
