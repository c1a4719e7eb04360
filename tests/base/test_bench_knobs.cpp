// Tests for bench/bench_knobs.h: the benchmarks' rows, registered above the library's (tp-launch
// --print-config lists them too).
#include <catch2/catch.hpp>

#include "bench/bench_knobs.h"
#include "layer_knobs_check.h"

namespace tp = tensorplay;

TEST_CASE("the benchmarks register their knobs above the library's", "[knobs]") {
  layer_knobs_check::check_layer("bench", bench::kBenchKnobs,
                                 {"base", "tensors", "transport", "wire", "observe", "distributed"},
                                 [] { bench::register_bench_knobs(); });
  CHECK(bench::kTorchInstallKnob.default_text == "1");
}
