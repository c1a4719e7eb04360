// The knobs of wire/: how long a silent peer connection lasts (read where the actor system is
// configured, wire/caf_system.cpp).
#pragma once

#include "tensorplay/base/knob_registry.h"
#include "tensorplay/base/knob_spec.h"
#include "tensorplay/transport/transport_knobs.h"

namespace tensorplay::pipelining {

/// TENSORPLAY_PEER_TIMEOUT: seconds a silent peer connection lasts.
inline constexpr KnobSpec kPeerTimeoutKnob{
    .name = "TENSORPLAY_PEER_TIMEOUT",
    .alias = "TP_PEER_TIMEOUT",
    .type = KnobType::Double,
    .default_text = "10",
    .min = 0.1,
    .max = 3600,
    .example = "30",
    .doc = "seconds a silent peer connection lasts before its rank counts as gone"};

/// The rows of wire/, in their order.
inline constexpr const KnobSpec* kWireKnobs[] = {&kPeerTimeoutKnob};

/// Registers the knobs of wire/ and of the layers below it (knob_registry.h).
inline void register_wire_knobs() {
  transport::register_transport_knobs();
  register_knobs("wire", kWireKnobs);
}

}  // namespace tensorplay::pipelining
