// The CAF actor around a StageWorker: turns protocol messages into worker calls and the worker's
// notifications into messages to the ranks hosting the receiving stages.
#pragma once

#include <caf/all.hpp>
#include <memory>
#include <string_view>
#include <vector>

#include "tensorplay/pipelining/runtime/detail/local_messages.h"
#include "tensorplay/pipelining/runtime/stage_worker.h"

namespace tensorplay::distributed::detail {
class CollectiveInbox;
}

namespace tensorplay::pipelining::detail {

/// The stage actor's interface: every message it takes, checked by the compiler at the actor's
/// behaviour and at every sender holding this handle. From other processes (trusted only from
/// the job's members): a notification, a peer's failure, a status question. From this
/// process: the stage actors of every rank (with their names), a step with its data and tally,
/// an abort, the resume of a yielded run, a posted receive completed (TensorsArrived), kept
/// rejections to take, and the check of a gone rank.
using StageActorHandle =
    caf::typed_actor<caf::reacts_to<Notification>,
                     caf::reacts_to<peer_failed_atom, uint64_t, int32_t, std::string>,
                     caf::replies_to<status_atom, uint64_t>::with<std::string>,
                     caf::reacts_to<peers_atom, std::vector<caf::actor>, std::vector<std::string>>,
                     caf::reacts_to<step_atom, uint64_t, StepHandle, StepTallyHandle>,
                     caf::reacts_to<abort_atom, uint64_t>, caf::reacts_to<resume_atom, uint64_t>,
                     caf::reacts_to<TensorsArrived>, caf::reacts_to<rejected_atom>,
                     caf::reacts_to<check_gone_atom, uint64_t>>;

/// The status actor's interface: what a rank does in a step, answered at once.
using StatusActorHandle =
    caf::typed_actor<caf::replies_to<status_atom, uint64_t>::with<std::string>>;

/// Spawns a detached stage actor (its own thread: stage compute blocks) for `worker`.
/// `stage_to_rank` maps every stage to the rank whose actor hosts it. An actor given its job's
/// `members` (across processes) accepts messages from other processes only from them, and tells
/// the other ranks when its step fails (their drivers are in other processes); without (null),
/// every rank is in this process.
/// `keep_alive` (e.g. the stages the worker points at) lives as long as the actor: an actor stuck
/// in compute when its schedule goes away is detached, not waited for, and must not outlive them.
StageActorHandle spawn_stage_actor(caf::actor_system& system, std::shared_ptr<StageWorker> worker,
                                   std::vector<int> stage_to_rank,
                                   std::shared_ptr<distributed::detail::CollectiveInbox> members,
                                   std::shared_ptr<const void> keep_alive = nullptr);

/// Spawns the actor that answers status requests for `stage_actor` (linked to it): the action
/// being computed, read from the worker at once, or (between actions) the stage actor's own
/// answer about the step asked for (not started, failed, or what it waits for). Status never
/// waits behind compute.
StatusActorHandle spawn_status_actor(caf::actor_system& system, std::shared_ptr<StageWorker> worker,
                                     StageActorHandle stage_actor);

/// The one entry point of a notification that came as a channel message (on the channel's
/// thread) for `worker`'s stage actor `actor`, from channel peer `peer`: decoded, checked, its
/// receive posted; the actor hears when the tensors are here (or why they will not come).
void deliver_notification(StageWorker& worker, const StageActorHandle& actor, int peer,
                          std::string_view bytes);

}  // namespace tensorplay::pipelining::detail
