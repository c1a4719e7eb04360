// Tests for memory_track.h: the message log's memory lines as a step's memory track.
#include <catch2/catch.hpp>
#include <sstream>

#include "tensorplay/observe/memory_track.h"
#include "tensorplay/schedules/timeline_export.h"

namespace pp = tensorplay::pipelining;

namespace {

std::vector<pp::LogEvent> parse(const std::string& text) {
  std::istringstream in(text);
  return pp::parse_message_log(in);
}

const char* kLog =
    "rank=0 step=1 event=start what=0F0 t_us=1000\n"
    "rank=0 step=1 event=finish what=0F0 t_us=1010\n"
    "rank=0 step=1 event=memory what=bytes:4096 t_us=1010\n"
    "rank=1 step=1 event=start what=1F0 t_us=1012\n"
    "rank=1 step=1 event=finish what=1F0 t_us=1020\n"
    "rank=1 step=1 event=memory what=bytes:8192 t_us=1020\n"
    "rank=0 step=1 event=start what=0B0 t_us=1030\n"
    "rank=0 step=1 event=finish what=0B0 t_us=1040\n"
    "rank=0 step=1 event=memory what=bytes:0 t_us=1040\n"
    "rank=0 step=2 event=memory what=bytes:1 t_us=2000\n";

}  // namespace

TEST_CASE("memory lines become the step's track on the timeline's clock", "[memory_track]") {
  auto track = pp::memory_track(parse(kLog), 1);
  REQUIRE(track.size() == 3);
  CHECK(track[0].rank == 0);
  CHECK(track[0].time == 10);
  CHECK(track[0].bytes == 4096);
  CHECK(track[1].rank == 1);
  CHECK(track[1].time == 20);
  CHECK(track[2].bytes == 0);
  CHECK(pp::most_held(track, 2) == std::vector<double>{4096, 8192});
  // The timeline's pictures draw it.
  tensorplay::schedules::SimulationResult result = pp::step_timeline(parse(kLog), 1);
  result.memory_track = track;
  CHECK_THAT(tensorplay::schedules::chrome_trace_json(result, 1.0),
             Catch::Contains("\"name\":\"memory rank 1\",\"ph\":\"C\""));
  CHECK_THAT(tensorplay::schedules::timeline_svg(result), Catch::Contains("<polyline"));
}

TEST_CASE("a log without memory lines has no track and a bad one is named", "[memory_track]") {
  CHECK(pp::memory_track(parse("rank=0 step=1 event=start what=0F0 t_us=1\n"), 1).empty());
  CHECK_THROWS_WITH(
      pp::memory_track(parse("rank=0 step=1 event=memory what=bytes:many t_us=1\n"), 1),
      Catch::Contains("'bytes:many'"));
}
