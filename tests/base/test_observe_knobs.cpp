// Tests for observe/observe_knobs.h (header-only, so tested here with the knob machinery): the
// message log's folder.
#include <catch2/catch.hpp>

#include "layer_knobs_check.h"
#include "tensorplay/observe/observe_knobs.h"

namespace tp = tensorplay;

TEST_CASE("observe registers the log folder above wire", "[knobs]") {
  layer_knobs_check::check_layer("observe", tp::pipelining::kObserveKnobs,
                                 {"base", "tensors", "transport", "wire"},
                                 [] { tp::pipelining::register_observe_knobs(); });
  CHECK(tp::pipelining::kLogDirKnob.alias == "TP_LOG_DIR");
}
