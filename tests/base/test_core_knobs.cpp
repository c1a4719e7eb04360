// Tests for core/core_knobs.h (the tensors layer's rows; header-only, so tested here with the
// knob machinery): the CPU target and threads, the host cache and CUDA's two.
#include <catch2/catch.hpp>

#include "layer_knobs_check.h"
#include "tensorplay/core/core_knobs.h"

namespace tp = tensorplay;

TEST_CASE("the tensors layer registers its knobs above base's", "[knobs]") {
  layer_knobs_check::check_layer("tensors", tp::kCoreKnobs, {"base"},
                                 [] { tp::register_core_knobs(); });
  CHECK(tp::kCpuIsaKnob.default_text == "auto");
  CHECK(tp::kNumThreadsKnob.max == 4096);
  CHECK(tp::kHostCacheMbKnob.default_text == "1024");
  CHECK(tp::kCudaDeviceMaxConnectionsKnob.third_party);
}
