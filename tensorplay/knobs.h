// Every knob of the library, for the programs that list them all (tp-launch --print-config, a
// program that checks the environment before it starts): one call registers every layer's rows.
#pragma once

#include "tensorplay/base/knob_registry.h"
#include "tensorplay/base/knobs.h"
#include "tensorplay/distributed/distributed_knobs.h"

namespace tensorplay {

/// Registers the knobs of every layer of the library (each layer's registration calls those of
/// the layers below it); knob_table() then holds them all. Calling it again is a no-op.
inline void register_library_knobs() { distributed::register_distributed_knobs(); }

}  // namespace tensorplay
