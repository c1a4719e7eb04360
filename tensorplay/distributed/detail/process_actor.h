// Each process's actor (private to distributed/): rank 0's answers at the rendezvous, clock
// samples, collectives' contributions, peers' failure notices and the watch on the other processes.
#pragma once

#include <caf/all.hpp>
#include <memory>
#include <string>

#include "tensorplay/distributed/detail/group_runtime.h"

namespace tensorplay::distributed::detail {

/// Monitor a peer's process actor (from this process only): its loss fails waits that need it.
using watch_atom = caf::atom_constant<caf::atom("watch")>;

/// This process's steady clock in microseconds (what a clock sample answers).
int64_t steady_now_us();

/// Spawns this process's actor for a job of `world_size` ranks whose cluster token is `token` and
/// whose launcher's job id is `job`;
/// it fills `inbox`. Rank 0's is the rendezvous: it answers each hello with the table of every
/// rank once all joined, or with why the rendezvous ended (RendezvousBook).
caf::actor spawn_process_actor(caf::actor_system& system, std::shared_ptr<CollectiveInbox> inbox,
                               int world_size, std::string token, int rank, std::string job = {});

}  // namespace tensorplay::distributed::detail
