// The process's CAF actor system (private to wire/).
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <memory>

namespace tensorplay::pipelining::detail {

/// The one actor system of this process, created on first use: a small sharing scheduler (stage
/// actors are detached and run on their own threads, so scheduler threads only carry messages).
caf::actor_system& process_actor_system();

/// A configuration for an actor system of the runtime: the scheduler, the middleman with its
/// heartbeats, the protocol's message types. The process's system uses one; a group joined with
/// its own system (join_job) another.
std::unique_ptr<caf::actor_system_config> make_actor_system_config();

/// How long a silent connection to another process lasts before that process counts as gone:
/// TENSORPLAY_PEER_TIMEOUT seconds (default 10; tensorplay/wire/wire_knobs.h). Throws
/// std::invalid_argument naming a bad value.
std::chrono::milliseconds peer_timeout_from_env();

}  // namespace tensorplay::pipelining::detail
