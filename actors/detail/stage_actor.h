// The CAF actor around a StageWorker: turns protocol messages into worker calls and the worker's
// notifications into messages to the ranks hosting the receiving stages.
#pragma once

#include <caf/all.hpp>
#include <memory>
#include <vector>

#include "actors/stage_worker.h"

namespace tensorplay::pipelining::detail {

/// Spawns a detached stage actor (its own thread: stage compute blocks) for `worker`.
/// `stage_to_rank` maps every stage to the rank whose actor hosts it. A `distributed` actor tells
/// the other ranks when its step fails (their drivers are in other processes).
caf::actor spawn_stage_actor(caf::actor_system& system, std::shared_ptr<StageWorker> worker,
                             std::vector<int> stage_to_rank, bool distributed = false);

}  // namespace tensorplay::pipelining::detail
