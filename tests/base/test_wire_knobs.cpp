// Tests for wire/wire_knobs.h (header-only, so tested here with the knob machinery): the peer
// timeout.
#include <catch2/catch.hpp>

#include "layer_knobs_check.h"
#include "tensorplay/wire/wire_knobs.h"

namespace tp = tensorplay;

TEST_CASE("wire registers the peer timeout above transport", "[knobs]") {
  layer_knobs_check::check_layer("wire", tp::pipelining::kWireKnobs,
                                 {"base", "tensors", "transport"},
                                 [] { tp::pipelining::register_wire_knobs(); });
  CHECK(tp::pipelining::kPeerTimeoutKnob.alias == "TP_PEER_TIMEOUT");
  CHECK(tp::pipelining::kPeerTimeoutKnob.default_text == "10");
}
