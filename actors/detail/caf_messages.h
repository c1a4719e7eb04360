// CAF atoms and message types of the stage actors' protocol. Private to actors/: nothing outside
// this folder sees CAF.
#pragma once

#include <caf/all.hpp>
#include <memory>

#include "actors/step_data.h"

namespace tensorplay::pipelining::detail {

using step_atom = caf::atom_constant<caf::atom("step")>;      // driver -> actor: begin a step
using forward_atom = caf::atom_constant<caf::atom("fwd")>;    // actor -> actor: input posted
using backward_atom = caf::atom_constant<caf::atom("bwd")>;   // actor -> actor: gradient posted
using done_atom = caf::atom_constant<caf::atom("done")>;      // actor -> driver: step finished
using failed_atom = caf::atom_constant<caf::atom("failed")>;  // actor -> driver: step failed
using abort_atom = caf::atom_constant<caf::atom("abort")>;    // driver -> actor: drop the step
using status_atom = caf::atom_constant<caf::atom("status")>;  // driver -> actor: what it waits for
using peers_atom = caf::atom_constant<caf::atom("peers")>;    // driver -> actor: rank handles

/// The step's data travels by pointer between actors of one process.
using StepHandle = std::shared_ptr<StepData>;

}  // namespace tensorplay::pipelining::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tensorplay::pipelining::detail::StepHandle)
