// tp-trace: reads message logs, rebuilds one step's compute actions per rank, and prints
// makespan, bubble and peak activations; optionally writes the step as a Chrome trace JSON
// (Perfetto) or an SVG timeline. Logs of two jobs are refused; a log holding several runs (one per
// process start) is read one run at a time; a step some rank did not log whole is refused,
// naming the rank. A log is the SPDLOG_LEVEL=debug output of an embedded run (all
// ranks in one process), or one file per rank from a launched run (a directory given reads its
// messages_rank_*.log); each file's clock line puts its times on rank 0's clock, so ranks on
// different hosts line up.
//
//   SPDLOG_LEVEL=debug ./train 2> run.log
//   tp-trace run.log                       # the last training step every rank logged whole
//   tp-trace run.log --step 3 --json --trace step3.json --svg step3.svg
//   tp-trace run.log --eval 1              # the first evaluation (forward only) instead
//   tp-trace run.log --run 1               # the first run of a log appended to
//   tp-launch --nproc-per-node 2 --log-dir logs ./train && tp-trace logs
//   tp-trace logs --plan plan.json --profile gpt.json --svg both.svg   # predicted vs measured
#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensorplay/observe/memory_track.h"
#include "tensorplay/observe/step_attribution.h"
#include "tensorplay/observe/trace_log.h"
#include "tensorplay/pipelining/planner/plan.h"
#include "tensorplay/pipelining/planner/plan_file.h"
#include "tensorplay/pipelining/planner/profile.h"
#include "tensorplay/pipelining/planner/step_comparison.h"
#include "tools/cli_checks.h"
#include "tools/timeline_output.h"
#include "tools/tp-trace/predicted.h"

namespace pp = tensorplay::pipelining;
namespace ts = tensorplay::schedules;

namespace {

struct Options {
  std::vector<std::string> logs;
  long long step = -1;  // a training step, counted as the trainer does; -1: the last whole one
  long long eval = -1;  // --eval K: the K-th evaluation logged instead; -1: none
  long long run = 0;
  bool run_given = false;
  tensorplay::tools::TimelineOutput out;
  std::string plan;     // --plan: set the simulator's prediction for it beside the step
  std::string profile;  // --profile: the costs the plan is predicted with
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

// Reads a log file as text, reporting what a log cut or damaged by hand looks like: a last line
// without its newline (the log was cut mid-line, or is still being written) is left out with a
// warning naming the file and line, since its last field may be cut short; a negative step number
// is an error naming the file and line (it would wrap to a huge unsigned step).
std::string read_log_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read log '" + path + "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  if (!text.empty() && text.back() != '\n') {
    std::cerr << "tp-trace: warning: '" << path << "' line " << lines + 1
              << " is cut short (no newline at the end: the log was truncated mid-line or is "
                 "still being written); that line is left out\n";
    text.resize(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  }
  size_t number = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    ++number;
    std::string_view line(text.data() + begin, end - begin);
    size_t at = line.find(" step=");
    if (at != std::string_view::npos && line.find(" event=") != std::string_view::npos &&
        at + 6 < line.size() && line[at + 6] == '-')
      throw std::runtime_error("'" + path + "' line " + std::to_string(number) + ": step=" +
                               std::string(line.substr(at + 6, line.find(' ', at + 6) - at - 6)) +
                               " is negative; steps count from 0 (a damaged log?)");
    begin = end + 1;
  }
  return text;
}

// Every file's run `run` (0: each file's newest) as one job's log, on rank 0's clock; logs of
// two jobs, or a rank in two files, are errors. What the reader should know first (the runs a
// file holds, logs that cannot be checked) goes to standard error.
pp::JobLog read_logs(const std::vector<std::string>& paths, int run) {
  std::vector<pp::MessageLogRuns> files;
  for (const std::string& path : log_files(paths)) {
    std::istringstream in(read_log_text(path));
    try {
      files.push_back({path, pp::parse_log_runs(in)});
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(path + ": " + e.what());
    }
  }
  pp::JobLog log = pp::read_job_log(files, run);
  for (const std::string& note : log.notes) std::cerr << "tp-trace: " << note << "\n";
  if (log.most_runs > 1 && run == 0)
    std::cerr << "tp-trace: --run K reads the K-th run of each log instead\n";
  return log;
}

// A rank runs one action at a time, each finishing after it starts. Intervals that run backwards
// or overlap come from a log appended to itself, logs of two runs in one file, or a damaged time;
// they would print negative busy or idle times, so they are refused, naming the file.
void check_intervals(const ts::SimulationResult& result, uint64_t step,
                     const std::map<int, std::string>& file_of_rank) {
  auto us = [](double t) { return std::to_string(std::llround(t)) + " us"; };
  auto file = [&](int rank) {
    auto it = file_of_rank.find(rank);
    return it == file_of_rank.end() ? std::string("the log") : "'" + it->second + "'";
  };
  std::map<int, std::vector<const ts::TimelineEvent*>> per_rank;
  for (const ts::TimelineEvent& entry : result.timeline) {
    if (entry.end < entry.start)
      throw std::runtime_error(file(entry.rank) + ": step " + std::to_string(step) + ": rank " +
                               std::to_string(entry.rank) + " finished " +
                               ts::to_string(entry.action) + " " + us(entry.start - entry.end) +
                               " before it started (a damaged or hand-edited time?)");
    per_rank[entry.rank].push_back(&entry);
  }
  for (auto& [rank, entries] : per_rank) {
    std::sort(entries.begin(), entries.end(),
              [](const auto* a, const auto* b) { return a->start < b->start; });
    for (size_t k = 1; k < entries.size(); ++k) {
      const ts::TimelineEvent& before = *entries[k - 1];
      const ts::TimelineEvent& after = *entries[k];
      if (after.start < before.end)
        throw std::runtime_error(
            file(rank) + ": step " + std::to_string(step) + ": rank " + std::to_string(rank) +
            " runs " + ts::to_string(after.action) + " from " + us(after.start) +
            " while it still runs " + ts::to_string(before.action) + " (until " + us(before.end) +
            "): overlapping actions on one rank (the same log appended twice, or two runs' logs "
            "in one file?); pass one run's log once");
    }
  }
}

// The simulator's step for the run's plan and its comparison with the measured step.
struct Prediction {
  ts::SimulationResult step;  // seconds
  pp::StepComparison comparison;
  std::string channel;  // the profile's channel the transfers were timed with
};

// The step tp-trace reads: a training step (numbered as the trainer counts them, evaluations
// left out) or, with --eval, an evaluation; what the log holds of each kind.
struct ChosenStep {
  uint64_t log_step = 0;  // its step= in the log
  uint64_t number = 0;    // the training step's number, or the evaluation's (from 1)
  bool evaluation = false;
  size_t training_logged = 0, evaluations_logged = 0;
};

void report(const Options& opt, const ts::SimulationResult& result,
            const pp::StepAttribution& attribution, const ChosenStep& chosen, bool processes);

// "training steps 1 to 9" for the error naming what the log has.
std::string training_range(const std::vector<pp::TrainingStep>& training) {
  if (training.empty()) return "no training step";
  if (training.size() == 1) return "training step " + std::to_string(training.front().number);
  return "training steps " + std::to_string(training.front().number) + " to " +
         std::to_string(training.back().number);
}

// --step, --eval or the default (the last training step every rank logged whole) as a log step.
ChosenStep choose_step(const Options& opt, const pp::JobLog& log) {
  const std::vector<pp::TrainingStep> training = pp::training_steps(log.events);
  const std::vector<uint64_t> evaluations = pp::evaluation_steps(log.events);
  ChosenStep chosen{.training_logged = training.size(), .evaluations_logged = evaluations.size()};
  if (opt.eval >= 0) {
    if (evaluations.empty())
      throw std::runtime_error("--eval " + std::to_string(opt.eval) +
                               ": the log holds no evaluation (forward-only step); it has " +
                               training_range(training));
    if (opt.eval < 1 || static_cast<size_t>(opt.eval) > evaluations.size())
      throw std::runtime_error("--eval " + std::to_string(opt.eval) +
                               " is not in the log; it has evaluations 1 to " +
                               std::to_string(evaluations.size()));
    chosen.evaluation = true;
    chosen.number = static_cast<uint64_t>(opt.eval);
    chosen.log_step = evaluations[opt.eval - 1];
    return chosen;
  }
  if (training.empty())
    throw std::runtime_error("the log holds no training step, only " +
                             std::to_string(evaluations.size()) +
                             " evaluation(s) (forward only); pass --eval K to read one");
  if (opt.step >= 0) {
    for (const pp::TrainingStep& t : training)
      if (t.number == static_cast<uint64_t>(opt.step)) {
        chosen.number = t.number;
        chosen.log_step = t.log_step;
        return chosen;
      }
    throw std::runtime_error("step " + std::to_string(opt.step) + " is not in the log; it has " +
                             training_range(training) +
                             (evaluations.empty() ? std::string()
                                                  : " (and " + std::to_string(evaluations.size()) +
                                                        " evaluation(s): --eval K)"));
  }
  // The last training step every rank logged whole; the last one logged when none is (its gaps
  // are then reported).
  const std::vector<uint64_t> whole = pp::complete_steps(log);
  chosen.number = training.back().number;
  chosen.log_step = training.back().log_step;
  for (auto t = training.rbegin(); t != training.rend(); ++t)
    if (std::binary_search(whole.begin(), whole.end(), t->log_step)) {
      chosen.number = t->number;
      chosen.log_step = t->log_step;
      break;
    }
  return chosen;
}

// How errors and notes name the step read: "step 3", "step 3 (log step 4)" when evaluations
// came before it, or "evaluation 1 (log step 2)".
std::string step_name(const ChosenStep& chosen) {
  if (chosen.evaluation)
    return "evaluation " + std::to_string(chosen.number) + " (log step " +
           std::to_string(chosen.log_step) + ")";
  return "step " + std::to_string(chosen.number) +
         (chosen.log_step == chosen.number ? std::string()
                                           : " (log step " + std::to_string(chosen.log_step) + ")");
}

// Whether the ranks ran in processes of their own: their events came from files of their own
// (tp-launch --log-dir), not all from one process's log.
bool separate_processes(const std::map<int, std::string>& file_of_rank) {
  for (const auto& [rank, file] : file_of_rank)
    if (file != file_of_rank.begin()->second) return true;
  return false;
}

int run(const Options& opt) {
  if (opt.step < -1)
    throw std::invalid_argument("--step " + std::to_string(opt.step) +
                                " is negative; give a step number >= 0, or leave --step out for "
                                "the last training step logged");
  if (opt.step >= 0 && opt.eval >= 0)
    throw std::invalid_argument("--step and --eval both name a step; pass one of them");
  if (opt.eval == 0 || opt.eval < -1)
    throw std::invalid_argument("--eval " + std::to_string(opt.eval) +
                                " is not an evaluation number; evaluations count from 1");
  if (opt.run_given && opt.run < 1)
    throw std::invalid_argument("--run " + std::to_string(opt.run) +
                                " is not a run number; runs count from 1 (leave --run out for "
                                "each log's newest)");
  const int run_number =
      opt.run_given ? static_cast<int>(std::min<long long>(opt.run, INT_MAX)) : 0;
  const pp::JobLog log = read_logs(opt.logs, run_number);
  const std::vector<pp::LogEvent>& events = log.events;
  const std::map<int, std::string>& file_of_rank = log.file_of_rank;
  std::vector<uint64_t> steps = pp::logged_steps(events);
  if (steps.empty())
    throw std::runtime_error(
        "no message-log lines found; run the program with SPDLOG_LEVEL=debug and pass its "
        "standard error, or launch it with tp-launch --log-dir DIR and pass DIR");
  const ChosenStep chosen = choose_step(opt, log);
  const uint64_t step = chosen.log_step;
  // Figures from some of the ranks would not be the step's: name the ranks missing or cut.
  if (std::string gaps = pp::step_gaps(log, step); !gaps.empty()) {
    std::string whole = "no training step is whole in every rank's log";
    const std::vector<uint64_t> complete = pp::complete_steps(log);
    for (const pp::TrainingStep& t : pp::training_steps(log.events))
      if (t.log_step < step && std::binary_search(complete.begin(), complete.end(), t.log_step))
        whole = "the last training step whole in every rank's log before it is " +
                std::to_string(t.number) + " (--step " + std::to_string(t.number) + ")";
    throw std::runtime_error(step_name(chosen) + " cannot be measured: " + gaps + "; " + whole);
  }
  if (step != steps.back())
    if (std::string gaps = pp::step_gaps(log, steps.back()); !gaps.empty())
      std::cerr << "tp-trace: note: the logs' last step (log step " << steps.back()
                << ") is not whole: " << gaps << "\n";
  ts::SimulationResult result = pp::step_timeline(events, step);
  check_intervals(result, step, file_of_rank);
  result.memory_track = pp::memory_track(events, step);  // drawn as a line and a counter
  const pp::StepAttribution attribution = pp::attribute_step(events, step);
  report(opt, result, attribution, chosen, separate_processes(file_of_rank));
  return 0;
}

// The simulator's step for --plan on --profile, beside `measured`; nullopt without --plan. Ranks
// in processes of their own are predicted over the profile's UCX channel (plan_channel).
std::optional<Prediction> predict(const Options& opt, const ts::SimulationResult& measured,
                                  bool processes) {
  if (opt.plan.empty() != opt.profile.empty())
    throw std::invalid_argument(
        "--plan and --profile go together: the plan names the configuration, the profile its "
        "costs (give both, or neither)");
  if (opt.plan.empty()) return std::nullopt;
  Prediction p;
  const pp::Profile profile = pp::load_profile(opt.profile);
  const pp::Plan plan = pp::load_plan(opt.plan);
  p.step = pp::predict_plan_step(profile, plan, processes);
  p.channel = pp::plan_channel(
                  profile, {.world = plan.ranks, .batch = plan.batch, .one_process = !processes})
                  .kind;
  std::vector<double> bytes;
  if (!measured.memory_track.empty())
    bytes = pp::most_held(measured.memory_track, static_cast<int>(measured.busy.size()));
  p.comparison = pp::compare_step(p.step, measured, 1e-6, bytes);
  return p;
}

void report(const Options& opt, const ts::SimulationResult& result,
            const pp::StepAttribution& attribution, const ChosenStep& chosen, bool processes) {
  const std::optional<Prediction> predicted = predict(opt, result, processes);
  const std::string title = step_name(chosen) + " (us)";
  // Times are microseconds: one cost-model unit per microsecond in the trace.
  if (predicted)
    tensorplay::tools::write_side_by_side(opt.out, result, predicted->step, title);
  else
    tensorplay::tools::write_timeline(opt.out, result, 1.0, title);
  const size_t ranks = result.busy.size();
  if (opt.out.json) {
    nlohmann::ordered_json j;
    j[chosen.evaluation ? "evaluation" : "step"] = chosen.number;
    j["log_step"] = chosen.log_step;
    j["steps_logged"] = chosen.training_logged;
    j["evaluations_logged"] = chosen.evaluations_logged;
    j["ranks"] = ranks;
    j["actions"] = result.actions;
    j["makespan_us"] = result.makespan;
    j["span_us"] = result.span;
    j["bubble_fraction"] = result.bubble_fraction;
    j["busy_us"] = result.busy;
    j["idle_us"] = result.idle;
    j["peak_activations"] = result.peak_activations;
    if (!result.memory_track.empty())
      j["bytes_held_max"] = pp::most_held(result.memory_track, static_cast<int>(ranks));
    j["attribution"] = nlohmann::ordered_json::parse(pp::attribution_json(attribution));
    if (predicted) {
      j["predicted"] = tensorplay::tools::comparison_json(predicted->comparison);
      j["predicted"]["channel"] = predicted->channel;
    }
    std::cout << j.dump() << "\n";
    return;
  }
  std::cout << step_name(chosen) << " (" << chosen.training_logged << " training steps"
            << (chosen.evaluations_logged
                    ? " and " + std::to_string(chosen.evaluations_logged) + " evaluations"
                    : std::string())
            << " logged" << (chosen.evaluation ? "; forward only" : "") << "): " << ranks
            << " ranks, " << result.actions << " actions\n"
            << "  makespan " << result.makespan << " us, bubble " << result.bubble_fraction * 100
            << "%\n";
  std::cout << ts::format_rank_figures(result, " us");
  std::cout << "where the time went (us):\n" << pp::format_attribution(attribution);
  if (!predicted) return;
  std::cout << pp::format_step_comparison(predicted->comparison);
  std::cout << "  transfers predicted over the profile's " << predicted->channel << " channel ("
            << (processes ? "ranks in processes of their own" : "ranks in one process") << ")\n";
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
  app.add_option("--step", opt.step,
                 "the training step to show, counted as the trainer counts them (evaluations "
                 "left out; default: the last one every rank logged whole)");
  app.add_option("--eval", opt.eval,
                 "show the K-th evaluation (a forward-only pass, PipelineSchedule::eval) instead; "
                 "counts from 1");
  app.add_option("--run", opt.run,
                 "the run to read from each log, counting from 1, when a log holds several "
                 "(the program started again with the same log; default: the newest)");
  tensorplay::tools::add_timeline_options(app, opt.out);
  app.add_option("--plan", opt.plan,
                 "a plan file (tp-plan, train_gpt --plan): print the simulator's prediction for "
                 "it beside the measured step, and draw it as a second set of tracks")
      ->check(CLI::ExistingFile);
  app.add_option("--profile", opt.profile, "the profile the plan's costs come from (with --plan)")
      ->check(CLI::ExistingFile);
  if (int status = tensorplay::tools::run_reporting_errors("tp-trace", [&] {
        tensorplay::tools::reject_unknown_flags(app, argc, argv);
        return 0;
      }))
    return status;
  CLI11_PARSE(app, argc, argv);
  opt.run_given = app.count("--run") > 0;
  return tensorplay::tools::run_reporting_errors("tp-trace", [&] { return run(opt); });
}
