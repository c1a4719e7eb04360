// Tests for tensorplay/pipelining/planner/profile.h: the JSON round trip, speedup interpolation,
// and clear errors.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "synthetic_profile.h"
#include "tensorplay/pipelining/planner/profile.h"

namespace pp = tensorplay::pipelining;

TEST_CASE("a profile survives the JSON round trip and a file", "[planner][profile]") {
  pp::Profile p = planner_test::synthetic({1.5, 2.25, 0.125}, 1000, 10);
  p.segments[1].parameter_bytes = 4096;
  p.segments[1].gradient_bytes = 4096;
  p.segments[1].optimizer_bytes = 8192;
  p.segments[0].output_bytes = 512;
  p.segments[2].overhead = 0.0625;
  p.segments[1].optimizer_seconds = 0.25;
  p.channels.push_back({"ucx_shm", 6e-6, 6.5e9});
  p.channels.push_back({"ucx_tcp", 2e-5, 1.25e9});
  p.threads = {{1, 1.0}, {2, 1.9}};
  p.cores = 8;
  p.action_overhead = 1.5e-5;
  p.compute_factor = 1.25;
  p.segments[2].larger = {{4, 0.5, 0.25, 0.125, 0.375}};
  p.larger_compute_factors = {{40, 1.125}, {80, 0.875}};
  p.activation_bytes_source = "host allocator";
  const pp::Profile back = pp::profile_from_json(pp::profile_to_json(p));
  CHECK(pp::profile_to_json(back) == pp::profile_to_json(p));
  CHECK(back.segments[1].name == "blocks.1");
  CHECK(back.segments[1].forward == 2.25);
  CHECK(back.segments[1].optimizer_bytes == 8192);
  CHECK(back.segments[2].overhead == 0.0625);
  CHECK(back.segments[1].optimizer_seconds == 0.25);
  REQUIRE(back.channels.size() == 3);
  CHECK(back.channels[0].kind == "in_process");  // in order: the first is the default
  CHECK(back.channel("ucx_shm").latency == 6e-6);
  CHECK(back.channel("ucx_shm").bandwidth == 6.5e9);
  CHECK(back.channel("ucx_tcp").bandwidth == 1.25e9);
  CHECK(back.threads.at(1).speedup == 1.9);
  CHECK(back.action_overhead == 1.5e-5);
  CHECK(back.compute_factor == 1.25);
  REQUIRE(back.segments[2].larger.size() == 1);
  CHECK(back.segments[2].larger[0].samples == 4);
  CHECK(back.segments[2].larger[0].full_backward == 0.375);
  CHECK(back.segments[0].larger.empty());
  REQUIRE(back.larger_compute_factors.size() == 2);
  CHECK(back.larger_compute_factors[1].samples == 80);
  CHECK(back.larger_compute_factors[1].compute_factor == 0.875);
  const std::string path = "test_profile_round_trip.json";
  pp::save_profile(p, path);
  CHECK(pp::profile_to_json(pp::load_profile(path)) == pp::profile_to_json(p));
  std::remove(path.c_str());
}

TEST_CASE("bad profiles are errors naming the field", "[planner][profile]") {
  CHECK_THROWS_WITH(pp::profile_from_json("{"), Catch::Contains("not valid JSON"));
  CHECK_THROWS_WITH(pp::profile_from_json("{\"format\": \"x\"}"), Catch::Contains("not a profile"));
  std::string text = pp::profile_to_json(planner_test::synthetic({1, 2}));
  const std::string bad = text.replace(text.find("\"forward\""), 9, "\"forwards\"");
  CHECK_THROWS_WITH(pp::profile_from_json(bad),
                    Catch::Contains("segments[0]") && Catch::Contains("'forward'"));
  CHECK_THROWS_WITH(pp::load_profile("no_such_profile.json"), Catch::Contains("no_such_profile"));
  pp::Profile negative = planner_test::synthetic({1, -1});
  CHECK_THROWS_WITH(negative.check(), Catch::Contains("blocks.1"));
  pp::Profile unordered = planner_test::synthetic({1});
  unordered.segments[0].larger = {{4, 1, 1, 1, 2}, {4, 1, 1, 1, 2}};
  CHECK_THROWS_WITH(unordered.check(), Catch::Contains("do not ascend"));
  unordered.segments[0].larger = {{1, 1, 1, 1, 2}};  // not above the microbatch's 1 sample
  CHECK_THROWS_WITH(unordered.check(), Catch::Contains("above the microbatch's 1 samples"));
  unordered.segments[0].larger = {{2, 1, -1, 1, 2}};
  CHECK_THROWS_WITH(unordered.check(), Catch::Contains("negative time at 2 samples"));
  pp::Profile no_compute = planner_test::synthetic({1});
  no_compute.compute_factor = 0;
  CHECK_THROWS_WITH(no_compute.check(), Catch::Contains("compute_factor must be > 0"));
  std::string older = pp::profile_to_json(planner_test::synthetic({1}));
  const size_t line = older.rfind('\n', older.find("\"compute_factor\"")) + 1;
  older.erase(line, older.find('\n', line) + 1 - line);  // saved before the factor existed
  CHECK(pp::profile_from_json(older).compute_factor == 1.0);
  CHECK(pp::profile_from_json(older).larger_compute_factors.empty());  // and the sized ones
  pp::Profile sized = planner_test::synthetic({1});
  sized.larger_compute_factors = {{4, 1.5}, {2, 1.5}};
  CHECK_THROWS_WITH(sized.check(), Catch::Contains("larger_compute_factors must ascend") &&
                                       Catch::Contains("(2 after 4)"));
  sized.larger_compute_factors = {{4, 0}};
  CHECK_THROWS_WITH(sized.check(), Catch::Contains("compute factor at 4 samples must be > 0"));
  CHECK_THROWS_WITH(planner_test::synthetic({1}).channel("ucx_shm"),
                    Catch::Contains("no channel 'ucx_shm'") && Catch::Contains("in_process"));
}

TEST_CASE("thread speedup interpolates between measured counts", "[planner][profile]") {
  pp::Profile p = planner_test::synthetic({1});
  CHECK(p.speedup(4) == 1.0);  // nothing measured: no gain
  p.threads = {{1, 1.0}, {2, 1.8}, {4, 3.0}};
  CHECK(p.speedup(1) == 1.0);
  CHECK(p.speedup(2) == 1.8);
  CHECK(p.speedup(3) == Approx(2.4));
  CHECK(p.speedup(8) == 3.0);  // past the last: flat
}

TEST_CASE("the compute factor at a microbatch follows the sizes calibrated", "[planner][profile]") {
  pp::Profile p = planner_test::synthetic({1});
  p.microbatch_size = 10;
  p.compute_factor = 1.5;
  CHECK(p.compute_factor_at(40) == 1.5);  // no larger sizes: one factor at every size
  p.larger_compute_factors = {{20, 1.25}, {40, 1.0}};
  CHECK(p.compute_factor_at(5) == 1.5);  // below the profile's microbatch: flat
  CHECK(p.compute_factor_at(10) == 1.5);
  CHECK(p.compute_factor_at(15) == Approx(1.375));
  CHECK(p.compute_factor_at(20) == 1.25);
  CHECK(p.compute_factor_at(30) == Approx(1.125));
  CHECK(p.compute_factor_at(80) == 1.0);  // past the largest: flat
  // At a calibrated size, that size's factor to the bit (1.1 + (0.3 - 1.1) is not 0.3).
  p.compute_factor = 1.1;
  p.larger_compute_factors = {{20, 0.3}};
  CHECK(p.compute_factor_at(20) == 0.3);
}
