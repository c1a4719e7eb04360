// Activation recomputation's price and gain: train_gpt's GPT at context 256, 4 stages under ZBV
// (2 ranks, embedded runtime), trained with full recomputation and without, side by side in one
// run: both jobs live at once and take turns step by step. Each side's figures: every rank's
// measured peak activation bytes (schedule.memory_stats(), the highest over the steps) and the
// median step time. Like a training loop, the steps ask for no outputs, so the last stage keeps
// none of its logits past each microbatch's loss.
//
//   ./build/bench/bench_recompute [--steps 9] [--context 256] [--batch 32] [--microbatches 8]
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

// One side's training job: its own copy of the model, schedule, optimizer and data.
class Trainer {
 public:
  Trainer(const bench::GptMemoryJob& job, const std::string& recompute)
      : job_(job),
        stages_(job.build(4, recompute)),
        schedule_(stages_, job.n_microbatches, job.loss()),
        opt_(pp::parameters(stages_), {.lr = 1e-3f}) {}

  // One training step; `timed` keeps its time. Every step's peak bytes count.
  void step(bool timed) {
    const tp::Tensor x = job_.tokens(data_);
    const tp::Tensor y = job_.tokens(data_);
    const auto start = std::chrono::steady_clock::now();
    schedule_.step({x}, {.target = y, .return_outputs = false});  // training reads the losses only
    if (timed) times_.push_back(bench::seconds_since(start));
    const pp::MemoryStats stats = schedule_.memory_stats(&opt_);
    side_.peak_activation_bytes.resize(stats.ranks.size());
    for (const auto& r : stats.ranks)
      side_.peak_activation_bytes[r.rank] = std::max(side_.peak_activation_bytes[r.rank],
                                                     static_cast<double>(r.peak_activation_bytes));
    opt_.step();
    opt_.zero_grad();
  }

  Side result() const {
    Side out = side_;
    out.step_seconds = bench::median(times_);
    return out;
  }

 private:
  const bench::GptMemoryJob& job_;
  std::vector<std::shared_ptr<pp::PipelineStage>> stages_;
  pp::ScheduleZBVZeroBubble schedule_;
  tp::optim::AdamW opt_;
  tp::Generator data_{21};
  std::vector<double> times_;
  Side side_;
};

void print_side(const std::string& name, const Side& side) {
  std::cout << "{\"side\":\"" << name
            << "\",\"peak_activation_bytes\":" << bench::json_list(side.peak_activation_bytes)
            << ",\"step_seconds\":" << side.step_seconds << "}" << std::endl;
}

int run(int argc, char** argv) {
  bench::GptMemoryJob job;
  job.context = 256;
  int steps = 9;
  bench::read_positive_flags(
      argc, argv,
      {
          {"--steps", [&](long v) { steps = static_cast<int>(v); }},
          {"--context", [&](long v) { job.context = v; }},
          {"--batch", [&](long v) { job.batch = v; }},
          {"--microbatches", [&](long v) { job.n_microbatches = static_cast<int>(v); }},
          {"--layers", [&](long v) { job.layers = v; }},
          {"--width", [&](long v) { job.width = v; }},
      });
  // Both sides live at once and take turns step by step, so that a slow spell of the machine falls
  // on both alike.
  Trainer none_trainer(job, "none");
  Trainer full_trainer(job, "full");
  for (int step = 0; step <= steps; ++step) {  // step 0 warms up, untimed
    none_trainer.step(step > 0);
    full_trainer.step(step > 0);
  }
  const Side none = none_trainer.result();
  print_side("none", none);
  const Side full = full_trainer.result();
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
