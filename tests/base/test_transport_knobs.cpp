// Tests for transport/transport_knobs.h (header-only, so tested here with the knob machinery):
// the UCX channel's spin and error mode.
#include <catch2/catch.hpp>

#include "layer_knobs_check.h"
#include "tensorplay/transport/transport_knobs.h"

namespace tp = tensorplay;

TEST_CASE("transport registers its knobs above the tensors layer's", "[knobs]") {
  layer_knobs_check::check_layer("transport", tp::transport::kTransportKnobs, {"base", "tensors"},
                                 [] { tp::transport::register_transport_knobs(); });
  CHECK(tp::transport::kUcxSpinUsKnob.default_text.empty());  // unset: the rank's cores decide
  CHECK_THROWS_WITH(
      tp::check_knob_text(tp::transport::kUcxErrorModeKnob, "always", "TENSORPLAY_UCX_ERROR_MODE"),
      Catch::Contains("one of auto, peer or none"));
}
