// The knobs of the transport layer: how the UCX channel's thread polls and how it handles peer
// errors (read in transport/detail/ucx_channel_impl.h).
#pragma once

#include "tensorplay/base/knob_registry.h"
#include "tensorplay/base/knob_spec.h"
#include "tensorplay/core/core_knobs.h"

namespace tensorplay::transport {

/// TENSORPLAY_UCX_SPIN_US: how long the UCX channel's thread polls before it sleeps.
inline constexpr KnobSpec kUcxSpinUsKnob{
    .name = "TENSORPLAY_UCX_SPIN_US",
    .type = KnobType::Int,
    .min = 0,
    .max = 1000000,
    .example = "50",
    .doc =
        "microseconds the UCX channel's thread polls before it sleeps (unset: 200, on while its "
        "rank waits in a step; none during steps on a rank of one core)"};

/// TENSORPLAY_UCX_ERROR_MODE: UCX peer error handling.
inline constexpr KnobSpec kUcxErrorModeKnob{
    .name = "TENSORPLAY_UCX_ERROR_MODE",
    .type = KnobType::Choice,
    .default_text = "auto",
    .choices = "auto|peer|none",
    .example = "peer",
    .doc =
        "UCX peer error handling: auto (for peers on other hosts only), peer (every peer) or "
        "none"};

/// The transport layer's rows, in their order.
inline constexpr const KnobSpec* kTransportKnobs[] = {&kUcxSpinUsKnob, &kUcxErrorModeKnob};

/// Registers the knobs of transport and of the layers below it (knob_registry.h).
inline void register_transport_knobs() {
  register_core_knobs();
  register_knobs("transport", kTransportKnobs);
}

}  // namespace tensorplay::transport
