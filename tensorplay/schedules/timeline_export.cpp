#include "tensorplay/schedules/timeline_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace tensorplay::schedules {
namespace {

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6g", value);
  return buffer;
}

std::string escape_xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Chrome's trace viewer has a fixed palette of colour names; Perfetto picks its own by name.
const char* trace_color_name(ActionKind kind) {
  switch (kind) {
    case ActionKind::Forward:
      return "thread_state_running";
    case ActionKind::BackwardInput:
      return "rail_load";
    case ActionKind::BackwardWeight:
      return "thread_state_iowait";
    case ActionKind::FullBackward:
      return "terrible";
    case ActionKind::OverlapFB:
      return "rail_animation";
    case ActionKind::Unshard:
      return "olive";
    case ActionKind::ReduceGrad:
      return "yellow";
    default:
      return "grey";
  }
}

int ranks_of(const SimulationResult& result) { return static_cast<int>(result.busy.size()); }

// The memory track as one Perfetto counter per rank ("memory rank R", in bytes).
void add_memory_counters(const SimulationResult& result, double microseconds_per_unit,
                         const std::function<void(const std::string&)>& add) {
  for (const MemorySample& s : result.memory_track) {
    const std::string r = std::to_string(s.rank);
    add("{\"name\":\"memory rank " + r + "\",\"ph\":\"C\",\"pid\":0,\"ts\":" +
        number(s.time * microseconds_per_unit) + ",\"args\":{\"bytes\":" + number(s.bytes) + "}}");
  }
}

// The memory track as a step line in each rank's row, scaled to the largest value of any rank.
std::string memory_lines(const SimulationResult& result, double left, double top, double row,
                         double scale) {
  double most = 0;
  for (const MemorySample& s : result.memory_track) most = std::max(most, s.bytes);
  if (most <= 0) return "";
  std::vector<std::string> points(ranks_of(result));
  std::vector<double> last_y(ranks_of(result), -1);
  for (const MemorySample& s : result.memory_track) {
    if (s.rank < 0 || s.rank >= ranks_of(result)) continue;
    const double x = left + s.time * scale;
    const double y = top + (s.rank + 1) * row - 3 - (row - 8) * s.bytes / most;
    std::string& p = points[s.rank];
    if (last_y[s.rank] >= 0) p += number(x) + "," + number(last_y[s.rank]) + " ";
    p += number(x) + "," + number(y) + " ";
    last_y[s.rank] = y;
  }
  std::string svg;
  for (const std::string& p : points)
    if (!p.empty())
      svg += "<polyline points=\"" + p +
             "\" fill=\"none\" stroke=\"#212121\" stroke-width=\"1.2\" opacity=\"0.8\"/>\n";
  return svg + "<text x=\"" + number(left) + "\" y=\"" + number(top - 4) +
         "\">line: activation bytes held (row height = " + number(most / (1024.0 * 1024.0)) +
         " MiB)</text>\n";
}

// A time axis with about ten ticks, at `axis_y`.
std::string time_axis(double makespan, double left, double scale, double axis_y) {
  std::string svg;
  double tick = std::pow(10.0, std::floor(std::log10(makespan / 10)));
  if (makespan / tick > 20) tick *= 2;
  if (makespan / tick > 20) tick *= 2.5;
  for (double t = 0; t <= makespan + 1e-9; t += tick) {
    double x = left + t * scale;
    svg += "<line x1=\"" + number(x) + "\" y1=\"" + number(axis_y) + "\" x2=\"" + number(x) +
           "\" y2=\"" + number(axis_y + 5) + "\" stroke=\"black\"/><text x=\"" + number(x) +
           "\" y=\"" + number(axis_y + 17) + "\" text-anchor=\"middle\">" + number(t) + "</text>\n";
  }
  return svg;
}

// The action kinds' colours, then the makespan and bubble, at `legend_y`.
std::string legend(const SimulationResult& result, double left, double legend_y) {
  std::string svg;
  double x = left;
  for (ActionKind kind :
       {ActionKind::Forward, ActionKind::BackwardInput, ActionKind::BackwardWeight,
        ActionKind::FullBackward, ActionKind::OverlapFB}) {
    svg += "<rect x=\"" + number(x) + "\" y=\"" + number(legend_y) +
           "\" width=\"12\" height=\"12\" fill=\"" + kind_color(kind) + "\"/><text x=\"" +
           number(x + 16) + "\" y=\"" + number(legend_y + 10) + "\">" +
           std::string(kind_name(kind)) + "</text>\n";
    x += 40 + 7 * static_cast<double>(kind_name(kind).size());
  }
  svg += "<text x=\"" + number(x + 20) + "\" y=\"" + number(legend_y + 10) + "\">makespan " +
         number(result.makespan) + ", bubble " + number(result.bubble_fraction * 100) +
         "%</text>\n";
  return svg;
}

}  // namespace

std::string kind_color(ActionKind kind) {
  switch (kind) {
    case ActionKind::Forward:
      return "#4caf50";
    case ActionKind::BackwardInput:
      return "#2196f3";
    case ActionKind::BackwardWeight:
      return "#ff9800";
    case ActionKind::FullBackward:
      return "#e53935";
    case ActionKind::OverlapFB:
      return "#8e24aa";
    case ActionKind::Unshard:
      return "#827717";
    case ActionKind::ReduceGrad:
      return "#fbc02d";
    default:
      return "#9e9e9e";
  }
}

std::string chrome_trace_json(const SimulationResult& result, double microseconds_per_unit) {
  std::string json = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  auto add = [&](const std::string& event) {
    json += first ? "\n" : ",\n";
    json += event;
    first = false;
  };
  add("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"pipeline\"}}");
  const int ranks = ranks_of(result);
  // Sharded stages' collectives (UNSHARD, RESHARD, REDUCE_GRAD) on a track of their own under
  // each rank's: tid ranks + rank.
  const bool collectives =
      std::any_of(result.timeline.begin(), result.timeline.end(),
                  [](const TimelineEvent& e) { return is_sharding(e.action.kind); });
  auto track = [&](int tid, const std::string& name, int sort) {
    const std::string t = std::to_string(tid);
    add("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" + t + ",\"args\":{\"name\":\"" +
        name + "\"}}");
    add("{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":" + t +
        ",\"args\":{\"sort_index\":" + std::to_string(sort) + "}}");
  };
  for (int rank = 0; rank < ranks; ++rank) {
    const std::string r = std::to_string(rank);
    track(rank, "rank " + r, collectives ? 2 * rank : rank);
    if (collectives) track(ranks + rank, "rank " + r + " collectives", 2 * rank + 1);
  }
  for (const TimelineEvent& e : result.timeline) {
    const int tid = is_sharding(e.action.kind) ? ranks + e.rank : e.rank;
    add("{\"name\":\"" + to_string(e.action) + "\",\"cat\":\"" +
        std::string(kind_name(e.action.kind)) + "\",\"ph\":\"X\",\"pid\":0,\"tid\":" +
        std::to_string(tid) + ",\"ts\":" + number(e.start * microseconds_per_unit) +
        ",\"dur\":" + number((e.end - e.start) * microseconds_per_unit) + ",\"cname\":\"" +
        trace_color_name(e.action.kind) + "\"}");
  }
  add_memory_counters(result, microseconds_per_unit, add);
  json += "\n]}\n";
  return json;
}

std::string timeline_svg(const SimulationResult& result, const std::string& title) {
  const int ranks = ranks_of(result);
  const double makespan = result.makespan > 0 ? result.makespan : 1.0;
  const double left = 70, top = title.empty() ? 20 : 40, row = 26, width = 1200;
  const double scale = width / makespan;
  const double height = top + ranks * row + 60;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                    number(left + width + 20) + "\" height=\"" + number(height) +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!title.empty()) {
    svg += "<text x=\"" + number(left) + "\" y=\"22\" font-size=\"15\">" + escape_xml(title) +
           "</text>\n";
  }
  for (int rank = 0; rank < ranks; ++rank) {
    double y = top + rank * row;
    svg += "<text x=\"5\" y=\"" + number(y + row * 0.65) + "\">rank " + std::to_string(rank) +
           "</text>\n";
    svg += "<rect x=\"" + number(left) + "\" y=\"" + number(y + 2) + "\" width=\"" + number(width) +
           "\" height=\"" + number(row - 4) + "\" fill=\"#f2f2f2\"/>\n";
  }
  for (const TimelineEvent& e : result.timeline) {
    double x = left + e.start * scale;
    double w = std::max((e.end - e.start) * scale, 0.5);
    double y = top + e.rank * row + 2;
    std::string label = to_string(e.action);
    svg += "<rect x=\"" + number(x) + "\" y=\"" + number(y) + "\" width=\"" + number(w) +
           "\" height=\"" + number(row - 4) + "\" fill=\"" + kind_color(e.action.kind) +
           "\" stroke=\"white\" stroke-width=\"0.5\"><title>" + escape_xml(label) + " [" +
           number(e.start) + ", " + number(e.end) + "]</title></rect>\n";
    if (w > 6.5 * static_cast<double>(label.size())) {
      svg += "<text x=\"" + number(x + w / 2) + "\" y=\"" + number(y + row * 0.55) +
             "\" text-anchor=\"middle\" fill=\"white\">" + escape_xml(label) + "</text>\n";
    }
  }
  svg += memory_lines(result, left, top, row, scale);
  const double axis_y = top + ranks * row + 4;
  svg += time_axis(makespan, left, scale, axis_y);
  svg += legend(result, left, axis_y + 28);
  svg += "</svg>\n";
  return svg;
}

}  // namespace tensorplay::schedules
