// The backend choice of a group's transfers and its NCCL ids: one decision, made alike on every
// member, serving the schedule's channel and the data-parallel all-reduce.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stages/pipeline_stage.h"

namespace tensorplay::pipelining::detail {

/// Whether this process would move `stages`' tensors over NCCL: the group was initialised with
/// the "nccl" backend, NCCL is usable here, and every stage is on a GPU.
bool wants_nccl_for(const std::vector<PipelineStage*>& stages);

/// Whether every member of the group of global `ranks` wants NCCL (`mine`: this member's
/// answer); a collective, `what` names it in errors.
bool all_want_nccl(const std::vector<int>& ranks, bool mine, const std::string& what);

/// `count` NCCL unique ids made by the group's first member (`my_index` 0) and shared with every
/// member of the group of global `ranks`; a collective, `what` names it in errors.
std::vector<std::vector<uint8_t>> agree_nccl_ids(const std::vector<int>& ranks, int my_index,
                                                 int count, const std::string& what);

}  // namespace tensorplay::pipelining::detail
