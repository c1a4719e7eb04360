// tp-trace: reads message logs, rebuilds one step's compute actions per rank, and prints
// makespan, bubble and peak activations; optionally writes the step as a Chrome trace JSON
// (Perfetto) or an SVG timeline. A log is the SPDLOG_LEVEL=debug output of an embedded run (all
// ranks in one process), or one file per rank from a launched run (a directory given reads its
// messages_rank_*.log); each file's clock line puts its times on rank 0's clock, so ranks on
// different hosts line up.
//
//   SPDLOG_LEVEL=debug ./train 2> run.log
//   tp-trace run.log                       # the last logged step
//   tp-trace run.log --step 3 --json --trace step3.json --svg step3.svg
//   tp-launch --nproc-per-node 2 --log-dir logs ./train && tp-trace logs
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <utility>
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

// The log files named by `paths`: a file as given, a directory as its messages_rank_R.log files
// in rank order.
std::vector<std::string> log_files(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  static const std::regex per_rank(R"(messages_rank_(\d+)\.log)");
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    if (!fs::is_directory(path)) {
      files.push_back(path);
      continue;
    }
    // Sorted by the rank's digits, shorter first: numeric order without parsing a number.
    std::vector<std::pair<std::pair<size_t, std::string>, std::string>> ranked;
    for (const fs::directory_entry& entry : fs::directory_iterator(path)) {
      std::smatch m;
      std::string name = entry.path().filename().string();
      if (entry.is_regular_file() && std::regex_match(name, m, per_rank))
        ranked.push_back({{m[1].length(), m[1].str()}, entry.path().string()});
    }
    if (ranked.empty())
      throw std::runtime_error("directory '" + path +
                               "' has no messages_rank_*.log files (run with tp-launch --log-dir " +
                               path + ", or pass the log files)");
    std::sort(ranked.begin(), ranked.end());
    for (auto& [digits, file] : ranked) files.push_back(std::move(file));
  }
  return files;
}

// Every file's events on rank 0's clock, as one list; a rank in two files is an error.
std::vector<pp::LogEvent> read_logs(const std::vector<std::string>& paths) {
  std::vector<pp::MessageLogFile> logs;
  for (const std::string& path : log_files(paths)) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read log '" + path + "'");
    try {
      logs.push_back({path, pp::parse_message_log(in)});
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(path + ": " + e.what());
    }
  }
  return pp::merge_message_logs(logs);
}

// Busy longer than the step means a rank's actions overlap: figures that would read as negative
// idle time are refused rather than printed.
void check_no_overlap(const ts::SimulationResult& result, uint64_t step) {
  auto us = [](double t) { return std::to_string(std::llround(t)) + " us"; };
  for (size_t r = 0; r < result.idle.size(); ++r)
    if (result.idle[r] < 0)
      throw std::runtime_error("step " + std::to_string(step) + ": rank " + std::to_string(r) +
                               " was busy " + us(result.busy[r]) + " in a " + us(result.makespan) +
                               " step, so its actions overlap (two runs' logs in one file?)");
}

int run(const Options& opt) {
  std::vector<pp::LogEvent> events = read_logs(opt.logs);
  std::vector<uint64_t> steps = pp::logged_steps(events);
  if (steps.empty())
    throw std::runtime_error(
        "no message-log lines found; run the program with SPDLOG_LEVEL=debug and pass its "
        "standard error, or launch it with tp-launch --log-dir DIR and pass DIR");
  uint64_t step = opt.step < 0 ? steps.back() : static_cast<uint64_t>(opt.step);
  if (std::find(steps.begin(), steps.end(), step) == steps.end())
    throw std::runtime_error("step " + std::to_string(step) + " is not in the log; it has steps " +
                             std::to_string(steps.front()) + " to " + std::to_string(steps.back()));
  ts::SimulationResult result = pp::step_timeline(events, step);
  check_no_overlap(result, step);
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
  app.add_option("logs", opt.logs,
                 "log files (standard error of SPDLOG_LEVEL=debug runs, or one file per rank), "
                 "or directories of messages_rank_*.log (tp-launch --log-dir)")
      ->required()
      ->check(CLI::ExistingPath);
  app.add_option("--step", opt.step, "the step to show (default: the last one logged)");
  tensorplay::tools::add_timeline_options(app, opt.out);
  CLI11_PARSE(app, argc, argv);
  return tensorplay::tools::run_reporting_errors("tp-trace", [&] { return run(opt); });
}
