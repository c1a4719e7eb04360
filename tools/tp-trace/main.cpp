// tp-trace: reads message logs (SPDLOG_LEVEL=debug output of processes on one host: their
// timestamps share the host's monotonic clock), rebuilds one step's compute actions per rank,
// and prints makespan, bubble and peak activations; optionally writes the step as a Chrome trace
// JSON (Perfetto) or an SVG timeline.
//
//   SPDLOG_LEVEL=debug ./train 2> run.log
//   tp-trace run.log                       # the last logged step
//   tp-trace run.log --step 3 --json --trace step3.json --svg step3.svg
#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "actors/trace_log.h"
#include "tools/timeline_output.h"

namespace pp = tensorplay::pipelining;
namespace ts = tensorplay::schedules;

namespace {

struct Options {
  std::vector<std::string> logs;
  long long step = -1;  // -1: the last logged step
  tensorplay::tools::TimelineOutput out;
};

int run(const Options& opt) {
  std::vector<pp::LogEvent> events;
  for (const std::string& path : opt.logs) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read log '" + path + "'");
    std::vector<pp::LogEvent> more = pp::parse_message_log(in);
    events.insert(events.end(), more.begin(), more.end());
  }
  std::vector<uint64_t> steps = pp::logged_steps(events);
  if (steps.empty())
    throw std::runtime_error(
        "no message-log lines found; run the program with SPDLOG_LEVEL=debug and pass its "
        "standard error");
  uint64_t step = opt.step < 0 ? steps.back() : static_cast<uint64_t>(opt.step);
  if (std::find(steps.begin(), steps.end(), step) == steps.end())
    throw std::runtime_error("step " + std::to_string(step) + " is not in the log; it has steps " +
                             std::to_string(steps.front()) + " to " + std::to_string(steps.back()));
  ts::SimulationResult result = pp::step_timeline(events, step);
  // Times are microseconds: one cost-model unit per microsecond in the trace.
  tensorplay::tools::write_timeline(opt.out, result, 1.0, "step " + std::to_string(step) + " (us)");
  const size_t ranks = result.busy.size();
  if (opt.out.json) {
    nlohmann::ordered_json j;
    j["step"] = step;
    j["steps_logged"] = steps.size();
    j["ranks"] = ranks;
    j["actions"] = result.actions;
    j["makespan_us"] = result.makespan;
    j["span_us"] = result.span;
    j["bubble_fraction"] = result.bubble_fraction;
    j["busy_us"] = result.busy;
    j["idle_us"] = result.idle;
    j["peak_activations"] = result.peak_activations;
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << "step " << step << " (" << steps.size() << " logged): " << ranks << " ranks, "
            << result.actions << " actions\n"
            << "  makespan " << result.makespan << " us, bubble " << result.bubble_fraction * 100
            << "%\n";
  std::cout << ts::format_rank_figures(result, " us");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tp-trace: a training step's timeline and figures from message logs"};
  Options opt;
  app.add_option("logs", opt.logs, "log files (standard error of SPDLOG_LEVEL=debug runs)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--step", opt.step, "the step to show (default: the last one logged)");
  tensorplay::tools::add_timeline_options(app, opt.out);
  CLI11_PARSE(app, argc, argv);
  return tensorplay::tools::run_reporting_errors("tp-trace", [&] { return run(opt); });
}
