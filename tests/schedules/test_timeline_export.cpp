#include <catch2/catch.hpp>

#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/schedules/timeline_export.h"

using namespace tensorplay::schedules;

namespace {
SimulationResult small_run() {
  return simulate_order(generate_order(ScheduleKind::InterleavedZeroBubble, 2, 1, 2), {0, 1}, 2,
                        CostModel::uniform(1, 1, 1));
}
std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("Chrome trace: one complete event per action, one named track per rank", "[timeline]") {
  SimulationResult r = small_run();
  std::string json = chrome_trace_json(r);
  CHECK(json.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0) == 0);
  CHECK(count(json, "\"ph\":\"X\"") == r.timeline.size());
  CHECK(count(json, "\"thread_name\"") == 2);
  CHECK(json.find("\"name\":\"1I0\",\"cat\":\"I\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":2000,"
                  "\"dur\":1000") != std::string::npos);
  CHECK(json.substr(json.size() - 3) == "]}\n");
}

TEST_CASE("SVG timeline: a box per action, coloured by kind", "[timeline]") {
  SimulationResult r = small_run();
  std::string svg = timeline_svg(r, "ZB-H1 <2 ranks>");
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(count(svg, "<title>") == r.timeline.size());
  CHECK(svg.find(kind_color(ActionKind::BackwardWeight)) != std::string::npos);
  CHECK(svg.find("ZB-H1 &lt;2 ranks&gt;") != std::string::npos);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(kind_color(ActionKind::Forward) != kind_color(ActionKind::FullBackward));
}
