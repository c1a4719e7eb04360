// Tests for base_knobs.h: base's own row (SPDLOG_LEVEL), at the bottom of the table.
#include <catch2/catch.hpp>

#include "layer_knobs_check.h"
#include "tensorplay/base/base_knobs.h"

namespace tp = tensorplay;

TEST_CASE("base registers SPDLOG_LEVEL at the bottom of the table", "[knobs]") {
  layer_knobs_check::check_layer("base", tp::kBaseKnobs, {}, [] { tp::register_base_knobs(); });
  CHECK(tp::knob_layers().front() == "base");
  CHECK(tp::kSpdlogLevelKnob.third_party);  // spdlog's own variable
  CHECK(tp::kSpdlogLevelKnob.default_text.empty());
}
