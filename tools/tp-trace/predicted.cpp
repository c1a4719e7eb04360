// tp-trace's predicted side (predicted.h).
#include "tools/tp-trace/predicted.h"

#include <cmath>

#include "tensorplay/schedules/timeline_export.h"

namespace tensorplay::tools {
namespace {

using json = nlohmann::ordered_json;

json figure(const pipelining::ComparedFigure& f, double scale) {
  const double error = f.error();
  return {{"predicted", f.predicted * scale},
          {"measured", f.measured * scale},
          {"error", std::isfinite(error) ? json(error) : json(nullptr)}};
}

// The events of one Chrome trace moved to process `pid`, named `name`.
json trace_events(const std::string& trace, int pid, const std::string& name) {
  json events = json::parse(trace)["traceEvents"];
  for (json& e : events) {
    e["pid"] = pid;
    if (e["name"] == "process_name") e["args"]["name"] = name;
  }
  return events;
}

// `svg` without its outer element, placed `y` pixels down inside another picture.
std::string nested(const std::string& svg, double y) {
  return "<svg y=\"" + std::to_string(y) + "\"" + svg.substr(svg.find("<svg") + 4);
}

// The value of the outer element's attribute `name` (its first occurrence in the text).
std::string attribute(const std::string& svg, const std::string& name) {
  const size_t at = svg.find(" " + name + "=\"") + name.size() + 3;
  return svg.substr(at, svg.find('"', at) - at);
}

}  // namespace

json comparison_json(const pipelining::StepComparison& c) {
  json j;
  j["step_us"] = figure(c.step_seconds, 1e6);
  j["bubble_fraction"] = figure(c.bubble, 1.0);
  j["ranks"] = json::array();
  for (const pipelining::RankComparison& r : c.ranks) {
    json rank = {{"rank", r.rank},
                 {"step_us", figure(r.step_seconds, 1e6)},
                 {"busy_us", figure(r.busy_seconds, 1e6)}};
    if (r.has_bytes) rank["peak_activation_bytes"] = figure(r.peak_bytes, 1.0);
    j["ranks"].push_back(rank);
  }
  j["kinds"] = json::array();
  for (const pipelining::KindComparison& k : c.kinds)
    j["kinds"].push_back({{"kind", std::string(schedules::kind_name(k.kind))},
                          {"actions", k.actions},
                          {"mean_us", figure(k.mean_seconds, 1e6)}});
  return j;
}

void write_side_by_side(const TimelineOutput& out, const schedules::SimulationResult& measured,
                        const schedules::SimulationResult& predicted, const std::string& title) {
  if (!out.trace.empty()) {
    json trace = {{"displayTimeUnit", "ms"}, {"traceEvents", json::array()}};
    for (json& e : trace_events(schedules::chrome_trace_json(measured, 1.0), 0, "measured"))
      trace["traceEvents"].push_back(std::move(e));
    for (json& e : trace_events(schedules::chrome_trace_json(predicted, 1e6), 1, "predicted"))
      trace["traceEvents"].push_back(std::move(e));
    write_file(out.trace, trace.dump() + "\n");
  }
  if (!out.svg.empty()) {
    const std::string top = schedules::timeline_svg(measured, "measured: " + title);
    // The prediction in microseconds, so both axes read alike.
    schedules::SimulationResult in_us = predicted;
    for (schedules::TimelineEvent& e : in_us.timeline) e.start *= 1e6, e.end *= 1e6;
    for (schedules::MemorySample& s : in_us.memory_track) s.time *= 1e6;
    in_us.makespan *= 1e6;
    const std::string bottom = schedules::timeline_svg(in_us, "predicted (us)");
    const double h1 = std::stod(attribute(top, "height"));
    const double h2 = std::stod(attribute(bottom, "height"));
    write_file(out.svg, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                            attribute(top, "width") + "\" height=\"" + std::to_string(h1 + h2) +
                            "\">\n" + nested(top, 0) + nested(bottom, h1) + "</svg>\n");
  }
}

}  // namespace tensorplay::tools
