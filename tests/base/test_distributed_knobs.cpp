// Tests for distributed/distributed_knobs.h and tensorplay/knobs.h (header-only, so tested here
// with the knob machinery): the cluster token and the rendezvous timeout, and every layer's rows
// registered by one call.
#include <catch2/catch.hpp>

#include "layer_knobs_check.h"
#include "tensorplay/distributed/distributed_knobs.h"
#include "tensorplay/knobs.h"

namespace tp = tensorplay;

TEST_CASE("distributed registers the token and the rendezvous timeout above observe", "[knobs]") {
  layer_knobs_check::check_layer("distributed", tp::distributed::kDistributedKnobs,
                                 {"base", "tensors", "transport", "wire", "observe"},
                                 [] { tp::register_library_knobs(); });
  CHECK(tp::distributed::kClusterTokenKnob.secret);                // printed hidden
  CHECK(tp::distributed::kRdzvTimeoutKnob.default_text == "300");  // tp-launch sets 900
}
