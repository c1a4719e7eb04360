// Tests for knob_spec.h: strict parsing of each kind of knob, and errors that name the variable,
// the value, what is expected and a good example (on the rows the layers declare).
#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>

#include "bench/bench_knobs.h"
#include "tensorplay/base/knob_spec.h"
#include "tensorplay/core/core_knobs.h"
#include "tensorplay/distributed/distributed_knobs.h"
#include "tensorplay/transport/transport_knobs.h"
#include "tensorplay/wire/wire_knobs.h"

namespace tp = tensorplay;

TEST_CASE("a whole-number knob accepts only whole numbers in its range", "[knobs]") {
  const tp::KnobSpec& threads = tp::kNumThreadsKnob;
  CHECK(tp::parse_knob_int(threads, "4", "TENSORPLAY_NUM_THREADS") == 4);
  CHECK(tp::parse_knob_int(threads, "0", "TENSORPLAY_NUM_THREADS") == 0);
  CHECK(tp::parse_knob_int(threads, "4096", "TENSORPLAY_NUM_THREADS") == 4096);
  for (const char* bad :
       {"4097", "-1", "abc", "4x", " 4", "4 ", "+4", "4.0", "0x10", "99999999999999999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(tp::parse_knob_int(threads, bad, "TENSORPLAY_NUM_THREADS"),
                    std::invalid_argument);
  }
  // The error names the variable, the value, the range and a good example.
  CHECK_THROWS_WITH(tp::parse_knob_int(threads, "4097", "TENSORPLAY_NUM_THREADS"),
                    Catch::Contains("TENSORPLAY_NUM_THREADS=4097") &&
                        Catch::Contains("a whole number from 0 to 4096") &&
                        Catch::Contains("e.g. TENSORPLAY_NUM_THREADS=4"));
  const tp::KnobSpec& cache = tp::kHostCacheMbKnob;
  CHECK(tp::parse_knob_int(cache, "1099511627776", "TENSORPLAY_HOST_CACHE_MB") == (1ll << 40));
  CHECK_THROWS_WITH(tp::parse_knob_int(cache, "256MB", "TENSORPLAY_HOST_CACHE_MB"),
                    Catch::Contains("TENSORPLAY_HOST_CACHE_MB=256MB") &&
                        Catch::Contains("e.g. TENSORPLAY_HOST_CACHE_MB=256"));
  const tp::KnobSpec& rdzv = tp::distributed::kRdzvTimeoutKnob;
  CHECK_THROWS_WITH(tp::parse_knob_double(rdzv, "0", "TENSORPLAY_RDZV_TIMEOUT"),
                    Catch::Contains("from 0.1 to 86400"));
}

TEST_CASE("a number knob accepts only finite numbers in its range", "[knobs]") {
  const tp::KnobSpec& timeout = tp::pipelining::kPeerTimeoutKnob;
  CHECK(tp::parse_knob_double(timeout, "2.5", "TENSORPLAY_PEER_TIMEOUT") == 2.5);
  CHECK(tp::parse_knob_double(timeout, "0.1", "TENSORPLAY_PEER_TIMEOUT") == 0.1);
  CHECK(tp::parse_knob_double(timeout, "3600", "TENSORPLAY_PEER_TIMEOUT") == 3600);
  CHECK(tp::parse_knob_double(timeout, "1e1", "TENSORPLAY_PEER_TIMEOUT") == 10);
  for (const char* bad : {"0.05", "3601", "nan", "inf", "-1", "ten", "10s", "", " 10"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(tp::parse_knob_double(timeout, bad, "TENSORPLAY_PEER_TIMEOUT"),
                    std::invalid_argument);
  }
  CHECK_THROWS_WITH(tp::parse_knob_double(timeout, "10s", "TENSORPLAY_PEER_TIMEOUT"),
                    Catch::Contains("TENSORPLAY_PEER_TIMEOUT=10s") &&
                        Catch::Contains("a number from 0.1 to 3600") &&
                        Catch::Contains("e.g. TENSORPLAY_PEER_TIMEOUT=30"));
}

TEST_CASE("a boolean knob accepts the usual words and nothing else", "[knobs]") {
  const tp::KnobSpec& tf32 = tp::kCudaTf32Knob;
  for (const char* yes : {"1", "true", "TRUE", "yes", "Yes", "on"}) {
    CAPTURE(yes);
    CHECK(tp::parse_knob_bool(tf32, yes, "TENSORPLAY_CUDA_TF32"));
  }
  for (const char* no : {"0", "false", "no", "Off", "OFF"}) {
    CAPTURE(no);
    CHECK_FALSE(tp::parse_knob_bool(tf32, no, "TENSORPLAY_CUDA_TF32"));
  }
  for (const char* bad : {"2", "y", "maybe", "enabled", " 1"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH(tp::parse_knob_bool(tf32, bad, "TENSORPLAY_CUDA_TF32"),
                      Catch::Contains(std::string("TENSORPLAY_CUDA_TF32=") + bad) &&
                          Catch::Contains("e.g. TENSORPLAY_CUDA_TF32=1"));
  }
}

TEST_CASE("a choice knob accepts only its words, and says which", "[knobs]") {
  const tp::KnobSpec& mode = tp::transport::kUcxErrorModeKnob;
  CHECK(tp::parse_knob_choice(mode, "peer", "TENSORPLAY_UCX_ERROR_MODE") == "peer");
  CHECK_THROWS_WITH(tp::parse_knob_choice(mode, "bogus", "TENSORPLAY_UCX_ERROR_MODE"),
                    Catch::Contains("one of auto, peer or none"));
  CHECK(tp::knob_expectation(mode) == "one of auto, peer or none");
  CHECK(tp::knob_expectation(tp::kNumThreadsKnob) == "a whole number from 0 to 4096");
  CHECK(tp::knob_expectation(tp::pipelining::kLogDirKnob) == "any text");
  // A text knob takes its text as it is.
  CHECK(tp::parse_knob_choice(tp::pipelining::kLogDirKnob, "a b=c", "TENSORPLAY_LOG_DIR") ==
        "a b=c");
}
