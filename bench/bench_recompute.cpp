// Activation recomputation's price and gain: train_gpt's GPT at context 256, 4 stages under ZBV
// (2 ranks, embedded runtime), trained with full recomputation and without, side by side in one
// run. Each side's figures: every rank's measured peak activation bytes (schedule.memory_stats(),
// the highest over the steps) and the median step time. Like a training loop, the steps ask for
// no outputs, so the last stage keeps none of its logits past each microbatch's loss.
//
//   ./build/bench/bench_recompute [--steps 5] [--context 256] [--batch 32] [--microbatches 8]
//                                 [--layers 4] [--width 128]
//
// Last line: "peak_ratio" (the worst rank's full over none) and "time_ratio" (median step time,
// full over none). Goals (issue): peak_ratio <= 0.35, time_ratio <= 1.35.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpt_memory_job.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

namespace {

struct Side {
  std::vector<double> peak_activation_bytes;  // per rank, the highest over the steps
  double step_seconds = 0;                    // median
};

Side train(const bench::GptMemoryJob& job, const std::string& recompute, int steps) {
  auto stages = job.build(4, recompute);
  pp::ScheduleZBVZeroBubble schedule(stages, job.microbatches, job.loss());
  tp::optim::AdamW opt(pp::parameters(stages), {.lr = 1e-3f});
  tp::Generator data(21);
  Side side;
  std::vector<double> times;
  for (int step = 0; step <= steps; ++step) {  // step 0 warms up, untimed
    const tp::Tensor x = job.tokens(data);
    const tp::Tensor y = job.tokens(data);
    const auto start = std::chrono::steady_clock::now();
    schedule.step({x}, {.target = y, .return_outputs = false});  // training reads the losses only
    if (step > 0) times.push_back(bench::seconds_since(start));
    const pp::MemoryStats stats = schedule.memory_stats(&opt);
    side.peak_activation_bytes.resize(stats.ranks.size());
    for (const auto& r : stats.ranks)
      side.peak_activation_bytes[r.rank] = std::max(side.peak_activation_bytes[r.rank],
                                                    static_cast<double>(r.peak_activation_bytes));
    opt.step();
    opt.zero_grad();
  }
  side.step_seconds = bench::median(times);
  return side;
}

void print_side(const std::string& name, const Side& side) {
  std::cout << "{\"side\":\"" << name
            << "\",\"peak_activation_bytes\":" << bench::json_list(side.peak_activation_bytes)
            << ",\"step_seconds\":" << side.step_seconds << "}" << std::endl;
}

int run(int argc, char** argv) {
  bench::GptMemoryJob job;
  job.context = 256;
  int steps = 5;
  bench::read_positive_flags(
      argc, argv,
      {
          {"--steps", [&](long v) { steps = static_cast<int>(v); }},
          {"--context", [&](long v) { job.context = v; }},
          {"--batch", [&](long v) { job.batch = v; }},
          {"--microbatches", [&](long v) { job.microbatches = static_cast<int>(v); }},
          {"--layers", [&](long v) { job.layers = v; }},
          {"--width", [&](long v) { job.width = v; }},
      });
  const Side none = train(job, "none", steps);
  print_side("none", none);
  const Side full = train(job, "full", steps);
  print_side("full", full);
  double peak_ratio = 0;
  for (size_t r = 0; r < none.peak_activation_bytes.size(); ++r)
    if (none.peak_activation_bytes[r] > 0)
      peak_ratio =
          std::max(peak_ratio, full.peak_activation_bytes[r] / none.peak_activation_bytes[r]);
  std::cout << "{\"bench\":\"bench_recompute\",\"schedule\":\"ZBVZeroBubble\",\"stages\":4,"
            << "\"context\":" << job.context << ",\"steps\":" << steps
            << ",\"peak_ratio\":" << peak_ratio << ",\"time_ratio\":"
            << (none.step_seconds > 0 ? full.step_seconds / none.step_seconds : 0) << "}"
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::run_reporting("bench_recompute", run, argc, argv); }
