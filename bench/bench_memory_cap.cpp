// The activation byte cap against the runtime: the dynamic policy under
// DynamicPolicyOptions::max_activation_bytes (set from the stages' profiles with
// cap_activation_bytes) on 4 ranks, one stage per rank with a full backward and two per rank (the
// V placement) with a split one, for caps from the least one can honour (what one microbatch
// needs at its peak) up to no cap. The model: gated residual blocks of mixed hidden widths with
// dropout (gated_mlp_job.h), one process, embedded runtime; the steps return no outputs (the cap
// does not count the outputs a step returns).
//
//   ./build/bench/bench_memory_cap [--steps 5] [--width 64]
//
// One JSON line per case (placement, cap as a multiple of the least, each rank's measured peak,
// the worst peak over the cap, median step time); the last line: "worst_peak_over_cap" (the
// highest measured peak over its cap of every capped case) and, per placement, the median step
// time at the least cap over the time with no cap. Goal (issue): worst_peak_over_cap <= 1.0.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "gated_mlp_job.h"
#include "gpt_memory_job.h"
#include "tensorplay/schedules/policy_factory.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

constexpr int kRanks = 4;

struct Case {
  std::vector<double> peaks;  // per rank, the highest over the steps
  double step_seconds = 0;    // median
};

Case run_case(const bench::GatedMlpJob& job, sc::ScheduleKind kind, bool split,
              const sc::MemoryCosts& costs, double cap, int steps) {
  const int per_rank = sc::is_single_stage_per_rank(kind) ? 1 : sc::default_stages_per_rank(kind);
  const int num_stages = kRanks * per_rank;
  pp::ScheduleOptions options;
  if (cap > 0) {
    sc::DynamicPolicyOptions policy;
    policy.split_backward = split;
    policy.cap_activation_bytes(cap, costs, num_stages);
    options.policy = sc::dynamic_policies(policy);
  } else {
    options.policy = sc::dynamic_policies({.split_backward = split});
  }
  auto stages = job.build(num_stages, "none");
  pp::PipelineSchedule schedule(stages, job.n_microbatches, job.loss(), kind, options);
  tp::Generator data(21);
  Case c;
  c.peaks.assign(kRanks, 0);
  std::vector<double> times;
  for (int step = 0; step < steps; ++step) {
    const tp::Tensor x = job.batch(data);
    const tp::Tensor y = job.batch(data);
    const auto start = std::chrono::steady_clock::now();
    schedule.step({x}, {.target = y, .return_outputs = false});
    times.push_back(bench::seconds_since(start));
    for (const auto& r : schedule.memory_stats().ranks)
      c.peaks[r.rank] = std::max(c.peaks[r.rank], static_cast<double>(r.peak_activation_bytes));
    for (auto& s : stages) s->module().zero_grad();
  }
  c.step_seconds = bench::median(times);
  return c;
}

int run(int argc, char** argv) {
  bench::GatedMlpJob job;
  int steps = 5;
  bench::read_positive_flags(argc, argv,
                             {
                                 {"--steps", [&](long v) { steps = static_cast<int>(v); }},
                                 {"--width", [&](long v) { job.width = v; }},
                             });
  double worst_over = 0;
  std::string time_ratios;
  struct Placement {
    const char* name;
    sc::ScheduleKind kind;
    bool split;
  };
  for (const Placement& p : {Placement{"one stage per rank, B", sc::ScheduleKind::OneFOneB, false},
                             Placement{"V, I and W", sc::ScheduleKind::ZBVZeroBubble, true}}) {
    const int per_rank =
        sc::is_single_stage_per_rank(p.kind) ? 1 : sc::default_stages_per_rank(p.kind);
    const int num_stages = kRanks * per_rank;
    const sc::MemoryCosts costs = pp::memory_costs_from(job.profile(job.build(num_stages, "none")));
    const std::vector<int> placement = sc::stage_to_rank(p.kind, kRanks, per_rank);
    // The least cap every rank can honour: its stages' kept and sent bytes plus its largest
    // workspace.
    const std::vector<double> kept = costs.kept_per_stage(num_stages);
    const std::vector<double> sent = costs.sent_per_stage(num_stages);
    const std::vector<double> workspace = costs.workspace_per_stage(num_stages);
    std::vector<double> per_rank_least(kRanks, 0), largest(kRanks, 0);
    for (int s = 0; s < num_stages; ++s) {
      per_rank_least[placement[s]] += kept[s] + sent[s];
      largest[placement[s]] = std::max(largest[placement[s]], workspace[s]);
    }
    double least = 0;
    for (int r = 0; r < kRanks; ++r) least = std::max(least, per_rank_least[r] + largest[r]);
    double least_time = 0, free_time = 0;
    for (double factor : {1.0, 1.5, 2.0, 3.0, 5.0, 0.0}) {
      const double cap = factor * least;
      const Case c = run_case(job, p.kind, p.split, costs, cap, steps);
      double over = 0;
      for (double peak : c.peaks)
        if (cap > 0) over = std::max(over, peak / cap);
      worst_over = std::max(worst_over, over);
      if (factor == 1.0) least_time = c.step_seconds;
      if (factor == 0.0) free_time = c.step_seconds;
      std::cout << "{\"placement\":\"" << p.name << "\",\"cap_over_least\":" << factor
                << ",\"cap\":" << static_cast<long long>(cap)
                << ",\"peaks\":" << bench::json_list(c.peaks) << ",\"peak_over_cap\":" << over
                << ",\"step_seconds\":" << c.step_seconds << "}" << std::endl;
    }
    time_ratios += std::string(time_ratios.empty() ? "" : ",") + "\"" + p.name +
                   "\":" + std::to_string(free_time > 0 ? least_time / free_time : 0.0);
  }
  std::cout << "{\"bench\":\"bench_memory_cap\",\"worst_peak_over_cap\":" << worst_over
            << ",\"least_cap_time_over_no_cap\":{" << time_ratios << "}}" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_reporting("bench_memory_cap", run, argc, argv);
}
