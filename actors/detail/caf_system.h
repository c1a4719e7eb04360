// The process's CAF actor system (private to actors/).
#pragma once

#include <caf/all.hpp>

namespace tensorplay::pipelining::detail {

/// The one actor system of this process, created on first use: a small sharing scheduler (stage
/// actors are detached and run on their own threads, so scheduler threads only carry messages).
caf::actor_system& process_actor_system();

}  // namespace tensorplay::pipelining::detail
