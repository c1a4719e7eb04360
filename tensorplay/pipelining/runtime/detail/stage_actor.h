// The CAF actor around a StageWorker: turns protocol messages into worker calls and the worker's
// notifications into messages to the ranks hosting the receiving stages.
#pragma once

#include <caf/all.hpp>
#include <memory>
#include <string_view>
#include <vector>

#include "tensorplay/pipelining/runtime/stage_worker.h"

namespace tensorplay::distributed::detail {
class CollectiveInbox;
}

namespace tensorplay::pipelining::detail {

/// Spawns a detached stage actor (its own thread: stage compute blocks) for `worker`.
/// `stage_to_rank` maps every stage to the rank whose actor hosts it. An actor given its job's
/// `members` (across processes) accepts messages from other processes only from them, and tells
/// the other ranks when its step fails (their drivers are in other processes); without (null),
/// every rank is in this process.
/// `keep_alive` (e.g. the stages the worker points at) lives as long as the actor: an actor stuck
/// in compute when its schedule goes away is detached, not waited for, and must not outlive them.
caf::actor spawn_stage_actor(caf::actor_system& system, std::shared_ptr<StageWorker> worker,
                             std::vector<int> stage_to_rank,
                             std::shared_ptr<distributed::detail::CollectiveInbox> members,
                             std::shared_ptr<const void> keep_alive = nullptr);

/// Spawns the actor that answers status requests for `stage_actor` (linked to it): the action
/// being computed, read from the worker at once, or (between actions) the stage actor's own
/// answer about the step asked for (not started, failed, or what it waits for). Status never
/// waits behind compute.
caf::actor spawn_status_actor(caf::actor_system& system, std::shared_ptr<StageWorker> worker,
                              caf::actor stage_actor);

/// The one entry point of a notification that came as a channel message (on the channel's
/// thread) for `worker`'s stage actor `actor`, from channel peer `peer`: decoded, checked, its
/// receive posted; the actor hears when the tensors are here (or why they will not come).
void deliver_notification(StageWorker& worker, const caf::actor& actor, int peer,
                          std::string_view bytes);

}  // namespace tensorplay::pipelining::detail
