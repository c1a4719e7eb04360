// What tp-sim and tp-trace share: the --trace, --svg and --json options, writing a step's
// timeline pictures, and reporting a failure as one line. Header-only, for tools/ programs.
#pragma once

#include <CLI/CLI.hpp>
#include <fstream>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>

#include "tensorplay/schedules/simulator.h"
#include "tensorplay/schedules/timeline_export.h"

namespace tensorplay::tools {

/// Where a tool writes a timeline, and whether it prints its figures as JSON.
struct TimelineOutput {
  std::string trace;  ///< Chrome trace JSON path (empty: none)
  std::string svg;    ///< SVG path (empty: none)
  bool json = false;

  bool wants_timeline() const { return !trace.empty() || !svg.empty(); }
};

/// Registers --trace, --svg and --json on `app`.
inline void add_timeline_options(CLI::App& app, TimelineOutput& out) {
  app.add_option("--trace", out.trace, "write a Chrome trace JSON (Perfetto)");
  app.add_option("--svg", out.svg, "write an SVG timeline");
  app.add_flag("--json", out.json, "print the figures as one JSON object");
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write '" + path + "'");
}

/// Writes the pictures asked for; one time unit of `result` is `microseconds_per_unit` in the
/// trace.
inline void write_timeline(const TimelineOutput& out, const schedules::SimulationResult& result,
                           double microseconds_per_unit, const std::string& title) {
  if (!out.trace.empty())
    write_file(out.trace, schedules::chrome_trace_json(result, microseconds_per_unit));
  if (!out.svg.empty()) write_file(out.svg, schedules::timeline_svg(result, title));
}

/// Runs `run`; an exception becomes "<tool>: <what>" on standard error and exit status 1.
inline int run_reporting_errors(const char* tool, const std::function<int()>& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << tool << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace tensorplay::tools
