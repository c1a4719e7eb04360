// tp-sim: generates (or loads) a pipeline schedule, checks it, and simulates one training step
// under a cost model, printing makespan, bubbles and peak activations; optionally writes the
// order as CSV, the timeline as Chrome trace JSON or SVG.
//
//   tp-sim --schedule ZBVZeroBubble --ranks 4 --microbatches 8 --cost F=0.5,I=0.5,W=0.5 --json
//   tp-sim --schedule dynamic --ranks 4 --microbatches 8 --cap 4 --split-backward
//   tp-sim --schedule 1F1B --ranks 4 --microbatches 8 --memory act=64M,recompute=8M,fixed=1G
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tensorplay/schedules/csv.h"
#include "tensorplay/schedules/errors.h"
#include "tensorplay/schedules/format.h"
#include "tensorplay/schedules/policy.h"
#include "tensorplay/schedules/policy_factory.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/schedules/simulator.h"
#include "tensorplay/schedules/timeline_export.h"
#include "tensorplay/schedules/validator.h"
#include "tools/cli_checks.h"
#include "tools/timeline_output.h"
#include "tools/tp-sim/memory_option.h"

namespace ts = tensorplay::schedules;

namespace {

struct Options {
  std::string schedule;
  int ranks = 0;
  int n_microbatches = 0;
  int stages_per_rank = 0;  // 0 = the schedule's default
  std::string cost = "F=1,I=1,W=1";
  double latency = 0.0;
  double bandwidth = 0.0;
  double bytes = 0.0;
  double overlap = 1.0;
  int cap = 0;
  std::string memory;  // --memory: the memory model's bytes
  bool recompute = false;
  std::string max_activation_bytes = "0";
  bool split_backward = false;
  std::string placement = "loop";
  std::string order_csv;
  bool print_order = false;
  std::string csv;
  tensorplay::tools::TimelineOutput out;
};

// "F=1,I=1,W=1" (B=x sets I and W to x/2 each when they are not given; R=x is the part of I a
// waiting rank may recompute ahead).
ts::CostModel parse_costs(const std::string& text) {
  double f = 1, i = -1, w = -1, b = -1, r = 0, c = 0;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos) {
      throw std::invalid_argument("--cost item '" + item + "' is not KEY=VALUE (e.g. F=1,I=1,W=1)");
    }
    std::string key = item.substr(0, eq);
    std::transform(key.begin(), key.end(), key.begin(), ::toupper);
    double value = tensorplay::tools::parse_number(item.substr(eq + 1), "--cost " + key);
    tensorplay::tools::require_finite_nonnegative(value, "--cost " + key);
    if (key == "F")
      f = value;
    else if (key == "I")
      i = value;
    else if (key == "W")
      w = value;
    else if (key == "B")
      b = value;
    else if (key == "R")
      r = value;
    else if (key == "C")
      c = value;
    else
      throw std::invalid_argument("--cost key '" + key + "' is not one of F, I, W, B, R, C");
  }
  if (b >= 0) {
    if (i < 0 && w < 0)
      i = w = b / 2;
    else if (i < 0)
      i = b - w;
    else if (w < 0)
      w = b - i;
    if (i < 0 || w < 0)
      throw std::invalid_argument("--cost: B=" + std::to_string(b) +
                                  " is less than the I or W given with it (B = I + W)");
  }
  ts::CostModel costs = ts::CostModel::uniform(f, i < 0 ? 1 : i, w < 0 ? 1 : w);
  if (r > 0) costs.recompute_ahead = {r};
  if (c > 0) costs.recompute = {c};
  return costs;
}

// The cost model the options give: times, the channel, and the memory model.
ts::CostModel costs_of(const Options& opt) {
  namespace tt = tensorplay::tools;
  tt::require_finite_nonnegative(opt.latency, "--latency");
  tt::require_finite_nonnegative(opt.bandwidth, "--bandwidth");
  tt::require_finite_nonnegative(opt.bytes, "--bytes");
  tt::require_finite_nonnegative(opt.overlap, "--overlap");
  ts::CostModel costs = parse_costs(opt.cost);
  costs.latency = opt.latency;
  costs.bandwidth = opt.bandwidth;
  costs.boundary_bytes = {opt.bytes};
  costs.overlap_factor = opt.overlap;
  if (!opt.memory.empty() || opt.recompute)
    costs.memory = tt::parse_memory(opt.memory, opt.recompute);
  return costs;
}

// What is simulated: the schedule's name, stages per rank, placement and (for a generated or
// loaded schedule) its order, validated, printed and saved as the options ask.
struct Setup {
  std::string name;
  int stages_per_rank = 0;
  std::vector<int> placement;
  ts::PipelineOrder order;
};

Setup dynamic_setup(const Options& opt) {
  Setup s{.name = "Dynamic", .stages_per_rank = opt.stages_per_rank == 0 ? 1 : opt.stages_per_rank};
  std::string where = opt.placement;
  std::transform(where.begin(), where.end(), where.begin(), ::tolower);
  if (where != "loop" && where != "v") {
    throw std::invalid_argument("--placement must be 'loop' or 'v', got '" + opt.placement + "'");
  }
  s.placement = ts::stage_to_rank(where == "v" ? ts::Placement::V : ts::Placement::Loop, opt.ranks,
                                  s.stages_per_rank);
  return s;
}

Setup ordered_setup(const Options& opt) {
  ts::ScheduleKind kind = ts::parse_schedule_kind(opt.schedule);
  Setup s{.name = std::string(ts::schedule_name(kind)), .stages_per_rank = opt.stages_per_rank};
  if (s.stages_per_rank == 0) s.stages_per_rank = ts::default_stages_per_rank(kind);
  s.placement = ts::stage_to_rank(kind, opt.ranks, s.stages_per_rank);
  s.order = opt.order_csv.empty()
                ? ts::generate_order(kind, opt.ranks, s.stages_per_rank, opt.n_microbatches)
                : ts::load_csv(opt.order_csv);
  ts::validate_order(s.order, opt.ranks * s.stages_per_rank, opt.n_microbatches, &s.placement);
  if (opt.print_order) {
    std::cout << ts::format_pipeline_order(
        ts::step_order(s.order, opt.ranks * s.stages_per_rank, opt.n_microbatches));
  }
  if (!opt.csv.empty()) ts::save_csv(opt.csv, s.order);
  return s;
}

void print_result(const Options& opt, const Setup& s, const ts::SimulationResult& result) {
  if (opt.out.json) {
    nlohmann::ordered_json j;  // keys in the documented order
    j["schedule"] = s.name;
    j["ranks"] = opt.ranks;
    j["stages_per_rank"] = s.stages_per_rank;
    j["microbatches"] = opt.n_microbatches;
    j["makespan"] = result.makespan;
    j["span"] = result.span;
    j["bubble_fraction"] = result.bubble_fraction;
    j["peak_activations"] = result.peak_activations;
    if (!result.peak_bytes.empty()) {
      j["peak_activation_bytes"] = result.peak_activation_bytes;
      j["peak_bytes"] = result.peak_bytes;
    }
    std::cout << j.dump() << "\n";
    return;
  }
  std::cout << s.name << ": " << opt.ranks << " ranks x " << s.stages_per_rank << " stages, "
            << opt.n_microbatches << " microbatches\n"
            << "  makespan " << result.makespan << ", span " << result.span << ", bubble "
            << result.bubble_fraction * 100 << "%\n";
  std::cout << ts::format_rank_figures(result);
}

int run(const Options& opt) {
  const ts::CostModel costs = costs_of(opt);
  const double max_activation_bytes =
      tensorplay::tools::parse_byte_count(opt.max_activation_bytes, "--max-activation-bytes");
  std::string lowered_name = opt.schedule;
  std::transform(lowered_name.begin(), lowered_name.end(), lowered_name.begin(), ::tolower);
  const bool dynamic = lowered_name == "dynamic";
  const Setup setup = dynamic ? dynamic_setup(opt) : ordered_setup(opt);

  // The factory the runtime uses (ScheduleOptions::policy), so what runs here runs there. The
  // byte cap counts what each stage keeps, sends on and needs while an action runs.
  ts::DynamicPolicyOptions dynamic_options{.split_backward = opt.split_backward,
                                           .max_stashed_activations = opt.cap};
  dynamic_options.cap_activation_bytes(max_activation_bytes, costs.memory,
                                       static_cast<int>(setup.placement.size()));
  std::vector<std::unique_ptr<ts::SchedulePolicy>> owned = ts::make_policies(
      dynamic ? ts::dynamic_policies(dynamic_options) : ts::static_order_policies(), setup.order,
      setup.placement, opt.n_microbatches);
  std::vector<ts::SchedulePolicy*> policies;
  for (auto& policy : owned) policies.push_back(policy.get());
  ts::SimulationOptions sim_options;
  // The memory model replays the timeline.
  sim_options.record_timeline = opt.out.wants_timeline() || !costs.memory.empty();
  ts::SimulationResult result =
      ts::simulate(policies, setup.placement, opt.n_microbatches, costs, sim_options);

  tensorplay::tools::write_timeline(opt.out, result, 1000.0,
                                    setup.name + ", " + std::to_string(opt.ranks) + " ranks, " +
                                        std::to_string(opt.n_microbatches) + " microbatches");
  print_result(opt, setup, result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tp-sim: simulate a pipeline-parallel schedule under a cost model"};
  Options opt;
  app.add_option("--schedule", opt.schedule,
                 "GPipe, 1F1B, Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble, "
                 "DualPipeV, VHalf, VMin (case-insensitive), or Dynamic (our greedy policy)")
      ->required();
  app.add_option("--ranks", opt.ranks, "pipeline ranks (p)")
      ->required()
      ->check(CLI::PositiveNumber);
  app.add_option("--microbatches", opt.n_microbatches, "microbatches per step (m)")
      ->required()
      ->check(CLI::PositiveNumber);
  app.add_option("--stages-per-rank", opt.stages_per_rank,
                 "stages per rank (V); default 1 for GPipe/1F1B/Dynamic, 2 otherwise")
      ->check(CLI::PositiveNumber);
  app.add_option("--cost", opt.cost,
                 "per stage pass times, e.g. F=1,I=1,W=1 (B = I + W; R = the part of I a "
                 "recomputing stage's rank may run ahead while it waits for the gradient; C = "
                 "the part of I that is the recomputation, which a backward run right after its "
                 "own F skips)")
      ->capture_default_str();
  app.add_option("--latency", opt.latency, "latency of every cross-rank transfer");
  app.add_option("--bandwidth", opt.bandwidth, "bytes per time unit (0 = infinite)");
  app.add_option("--bytes", opt.bytes, "bytes crossing each stage boundary");
  app.add_option("--overlap", opt.overlap, "OVERLAP_F_B costs overlap * (F + B)");
  app.add_option("--cap", opt.cap, "Dynamic: most stashed activations per rank (0 = none)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--split-backward", opt.split_backward, "Dynamic: run backward as I then W");
  app.add_option(
      "--memory", opt.memory,
      "bytes per stage for the memory model: act=,recompute=,stash=,transient=,retained=,sent=,"
      "fixed= (K, M, G suffixes); prints each rank's predicted peak bytes");
  app.add_flag("--recompute", opt.recompute, "every stage recomputes (its F keeps recompute=)");
  app.add_option("--max-activation-bytes", opt.max_activation_bytes,
                 "Dynamic: most activation bytes per rank (0 = none; needs --memory act=)");
  app.add_option("--placement", opt.placement,
                 "Dynamic: 'loop' (stage s on rank s % p) or 'v' (rank r holds r and 2p-1-r)");
  app.add_option("--order-csv", opt.order_csv, "simulate this compute-only CSV order instead");
  app.add_flag("--print-order", opt.print_order, "print the step-by-rank table");
  app.add_option("--csv", opt.csv, "write the compute-only order as CSV");
  tensorplay::tools::add_timeline_options(app, opt.out);
  if (int status = tensorplay::tools::run_reporting_errors("tp-sim", [&] {
        tensorplay::tools::reject_unknown_flags(app, argc, argv);
        return 0;
      }))
    return status;
  CLI11_PARSE(app, argc, argv);
  return tensorplay::tools::run_reporting_errors("tp-sim", [&] { return run(opt); });
}
