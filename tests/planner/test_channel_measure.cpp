// Tests for tensorplay/pipelining/planner/channel_measure.h: the UCX ping-pong over loopback gives
// a positive latency and bandwidth per transport selection, and a transport this host lacks is left
// out, with why.
#include <catch2/catch.hpp>
#include <chrono>

#include "tensorplay/pipelining/planner/channel_measure.h"

namespace pp = tensorplay::pipelining;
using namespace std::chrono_literals;

namespace {

// Few, short rounds: the test checks the measurement works, it does not time the machine.
pp::PingPongOptions quick() {
  return {
      .small_bytes = 64, .large_bytes = 1u << 20, .rounds = 5, .pause = 200us, .timeout = 5000ms};
}

}  // namespace

TEST_CASE("the ucx ping-pong gives a positive latency and bandwidth on loopback",
          "[planner][ucx]") {
  for (const pp::UcxChannelSpec& spec : pp::default_ucx_channels()) {
    INFO(spec.kind << " over '" << spec.transports << "'");
    const auto start = std::chrono::steady_clock::now();
    const pp::ChannelProfile c = pp::measure_ucx_channel(spec, quick());
    CHECK(c.kind == spec.kind);
    CHECK(c.latency > 0);
    CHECK(c.latency < 0.1);  // a loopback transfer of 64 bytes: microseconds, not a timeout
    CHECK(c.bandwidth > 0);
    CHECK(std::chrono::steady_clock::now() - start < 30s);
  }
  CHECK(pp::default_ucx_channels().at(0).kind == "ucx_shm");
  CHECK(pp::default_ucx_channels().at(1).kind == "ucx_tcp");
}

TEST_CASE("a ucx transport the host lacks is left out with a line saying why", "[planner][ucx]") {
  std::vector<std::string> lines;
  const std::vector<pp::UcxChannelSpec> specs{
      {.kind = "ucx_bogus", .transports = "no_such_transport"},
      {.kind = "ucx_tcp", .transports = "tcp", .same_host = false}};
  const std::vector<pp::ChannelProfile> measured = pp::measure_ucx_channels(
      specs, quick(), [&](const std::string& line) { lines.push_back(line); });
  REQUIRE(measured.size() == 1);
  CHECK(measured[0].kind == "ucx_tcp");
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::Contains("ucx_bogus") && Catch::Contains("no_such_transport") &&
                           Catch::Contains("left out"));
}

TEST_CASE("a ping-pong whose sizes cannot give a bandwidth is refused", "[planner][ucx]") {
  pp::PingPongOptions o = quick();
  o.large_bytes = o.small_bytes;
  CHECK_THROWS_WITH(pp::measure_ucx_channel(pp::default_ucx_channels().at(1), o),
                    Catch::Contains("must exceed"));
}
