// A data-parallel process group as the ReplicaExchange of checkpoints
// (tensorplay/pipelining/checkpoints/replica_exchange.h): what lets a layout-free checkpoint's load
// split its reading among a stage's replicas.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tensorplay/distributed/process_group.h"
#include "tensorplay/pipelining/checkpoints/replica_exchange.h"
#include "tensorplay/pipelining/pipeline_stage.h"

namespace tensorplay::pipelining {

/// The members of `group` as replicas (replica index: group rank): all_gather is the group's
/// all_gather_bytes, all_gather_tensors its all_gather_tensors (bytes over UCX). Throws
/// std::invalid_argument when this process is not a member.
///
///   pp::load_named_checkpoint(dir, stages, opt, std::nullopt,
///                             {.replicas = pp::replica_exchange(mesh["dp"])});
std::shared_ptr<ReplicaExchange> replica_exchange(const distributed::ProcessGroup& group);

/// The replicas of `stages` along their mesh's dimension `dim` (the group through this rank
/// there: ranks holding the same stages); null when the stages were built without a mesh, the
/// mesh has no such dimension, or it has one rank there.
std::shared_ptr<ReplicaExchange> replica_exchange(
    const std::vector<std::shared_ptr<PipelineStage>>& stages, const std::string& dim = "dp");

}  // namespace tensorplay::pipelining
