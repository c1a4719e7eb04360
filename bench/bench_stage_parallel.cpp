// Stages computing in parallel inside one process: an MLP of 8 blocks Linear(1024, 1024) + ReLU,
// batch 128 in 8 microbatches, split into stages hosted by two stage actors (two ranks of the
// embedded runtime, one thread and one product thread each) under 1F1B, ZBVZeroBubble and
// Interleaved1F1B, against the unsplit model on one thread (microbatched the same way). On two
// free cores the pipeline should reach at least 1.7 times the samples/s. Each figure is the best
// of --rounds rounds; the process CPU seconds per wall second show how many cores it used.
// With --default-threads it compares instead, on a two-stage 1F1B pipeline, no thread setting at
// all (each stage actor takes its share of the cores) against one product thread per stage set
// by hand: "default_threads_ratio" should be at least 0.97. Each schedule's line also holds its
// ideal speed-up (bench_pipeline_procs's), what the process's threads did over the timed steps,
// and the attribution of 3 more steps run with the message log on (step_attribution.h), which
// is also printed per rank on standard error; "worst_share_of_ideal" is the lowest speed-up over
// its ideal.
//
// Each rank's optimizer steps on a thread of its own after step() ("optimizer_us": their wall
// time per step); --one-optimizer steps them one after the other on the caller's thread.
//
//   ./build/bench/bench_stage_parallel [--rounds 3] [--steps 10] [--warmup 2] [--default-threads]
//                                      [--one-optimizer]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mlp_pipeline_job.h"
#include "tensorplay/pipelining/build_stage.h"

namespace {

using bench::MlpJob;
namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

struct Rate {
  double samples_per_s = 0, cores_used = 0;
  std::optional<pp::StepAttribution> attribution;  // of steps run after the timed ones, logged
  std::string threads;                             // thread_times_json over the timed steps
  double logged_step_us = 0;                       // the attributed steps' mean wall time
  double optimizer_us = 0;  // the optimizers' mean wall time per timed step (after step())
};

constexpr int kAttributionSteps = 3;  // logged steps after the timed ones
bool one_optimizer = false;           // --one-optimizer: the ranks' optimizers one after the other

// The mean attribution of `steps` more steps, run with the message log captured in memory;
// `wall_us` gets their mean wall time (the optimizer's step included).
pp::StepAttribution attribute(const std::function<void()>& step, int steps, double& wall_us) {
  const std::string text = pp::capture_message_log([&] {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) step();
    wall_us = 1e6 * bench::seconds_since(start) / steps;
  });
  std::istringstream in(text);
  const std::vector<pp::LogEvent> events = pp::parse_message_log(in);
  std::vector<pp::StepAttribution> attributed;
  for (uint64_t logged : pp::logged_steps(events))
    attributed.push_back(pp::attribute_step(events, logged));
  return pp::mean_attribution(attributed);
}

// The pipeline in this process: every stage here, two ranks, each rank's stages on its actor.
Rate in_process_pipeline(const MlpJob& job, const std::string& schedule, bool by_hand = true) {
  const auto kind = tp::schedules::parse_schedule_kind(schedule);
  const int num_stages = 2 * tp::schedules::default_stages_per_rank(kind);
  tp::manual_seed(0);
  bench::Mlp model(job.width, job.blocks);
  pp::Pipe pipe = bench::split_mlp(model, job, num_stages);
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  if (by_hand)
    for (auto& stage : stages) stage->set_num_threads(1);  // one product thread per stage actor
  pp::PipelineSchedule pipeline(stages, job.n_microbatches, tp::nn::mse_loss, kind,
                                {.step_timeout = std::chrono::seconds(120)});
  // One optimizer per rank over its own stages, stepped at once on two threads, as each process
  // steps its own in bench_pipeline_procs: one optimizer over every stage on the caller's thread
  // (--one-optimizer: both stepped there, one after the other) leaves a core idle meanwhile.
  std::vector<std::unique_ptr<tp::optim::SGD>> optimizers;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::shared_ptr<pp::PipelineStage>> own;
    for (int s : pp::stages_of_rank(kind, rank, num_stages)) own.push_back(stages[s]);
    optimizers.push_back(
        std::make_unique<tp::optim::SGD>(pp::parameters(own), tp::optim::SGDOptions{.lr = job.lr}));
  }
  bench::MlpData data(job);
  std::vector<tp::Tensor> losses;
  double optimizer_seconds = 0;
  auto step = [&] {
    losses.clear();
    pipeline.step({data.x}, {.target = data.y, .losses = &losses});
    const auto optimizer_start = std::chrono::steady_clock::now();
    auto update = [&](int rank) {
      optimizers[rank]->step();
      optimizers[rank]->zero_grad();
    };
    if (one_optimizer) {
      update(0);
      update(1);
    } else {
      std::thread other(update, 1);
      update(0);
      other.join();
    }
    optimizer_seconds += bench::seconds_since(optimizer_start);
  };
  for (int i = 0; i < job.warmup; ++i) step();
  optimizer_seconds = 0;
  const auto threads_before = pp::process_thread_times();
  auto start = std::chrono::steady_clock::now();
  const double cpu_start = bench::process_cpu_seconds();
  for (int i = 0; i < job.steps; ++i) step();
  const double seconds = bench::seconds_since(start);
  Rate rate{job.samples() / seconds, (bench::process_cpu_seconds() - cpu_start) / seconds};
  rate.optimizer_us = 1e6 * optimizer_seconds / job.steps;
  rate.threads =
      pp::thread_times_json(pp::thread_times_since(threads_before, pp::process_thread_times()));
  if (by_hand) rate.attribution = attribute(step, kAttributionSteps, rate.logged_step_us);
  return rate;
}

int option(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

bool flag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return true;
  return false;
}

// No thread setting anywhere in the process against one product thread per stage by hand.
int default_threads(const MlpJob& job, int rounds) {
  Rate by_default, by_hand;
  for (int round = 0; round < rounds; ++round) {  // alternate, so load shifts hit both sides
    Rate d = in_process_pipeline(job, "1F1B", false);
    if (d.samples_per_s > by_default.samples_per_s) by_default = d;
    Rate h = in_process_pipeline(job, "1F1B", true);
    if (h.samples_per_s > by_hand.samples_per_s) by_hand = h;
  }
  std::printf("{\"side\": \"no thread setting\", \"samples_per_s\": %.1f, \"cores_used\": %.2f}\n",
              by_default.samples_per_s, by_default.cores_used);
  std::printf(
      "{\"side\": \"one product thread per stage\", \"samples_per_s\": %.1f, \"cores_used\": "
      "%.2f}\n",
      by_hand.samples_per_s, by_hand.cores_used);
  std::printf(
      "{\"bench\": \"stage_parallel\", \"mode\": \"default_threads\", \"schedule\": \"1F1B\", "
      "\"stages\": 2, \"rounds\": %d, \"default_threads_ratio\": %.3f, \"goal\": 0.97}\n",
      rounds, by_default.samples_per_s / by_hand.samples_per_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MlpJob job;
  job.steps = option(argc, argv, "--steps", 10);
  job.warmup = option(argc, argv, "--warmup", 2);
  const int rounds = option(argc, argv, "--rounds", 3);
  one_optimizer = flag(argc, argv, "--one-optimizer");
  if (flag(argc, argv, "--default-threads")) return default_threads(job, rounds);
  tp::set_default_num_threads(1);
  const std::vector<std::string> schedules = {"1F1B", "ZBVZeroBubble", "Interleaved1F1B"};
  double unsplit = 0;
  std::vector<Rate> best(schedules.size());
  for (int round = 0; round < rounds; ++round) {  // alternate, so load shifts hit every side
    unsplit = std::max(unsplit, bench::one_process_samples_per_s(job));
    for (size_t i = 0; i < schedules.size(); ++i) {
      Rate r = in_process_pipeline(job, schedules[i]);
      if (r.samples_per_s > best[i].samples_per_s) best[i] = r;
    }
  }
  std::printf("{\"side\": \"unsplit, one thread\", \"samples_per_s\": %.1f}\n", unsplit);
  double worst = 1e30, worst_share = 1e30;
  for (size_t i = 0; i < schedules.size(); ++i) {
    const double speedup = best[i].samples_per_s / unsplit;
    worst = std::min(worst, speedup);
    const double ideal = bench::ideal_speedup(schedules[i], 2, job.n_microbatches);
    std::printf(
        "{\"schedule\": \"%s\", \"samples_per_s\": %.1f, \"cores_used\": %.2f, \"speedup\": "
        "%.3f, \"ideal\": %.3f, \"logged_step_us\": %.0f, \"optimizer_us\": %.0f, "
        "\"threads\": %s, \"attribution\": %s}\n",
        schedules[i].c_str(), best[i].samples_per_s, best[i].cores_used, speedup, ideal,
        best[i].logged_step_us, best[i].optimizer_us, best[i].threads.c_str(),
        best[i].attribution ? pp::attribution_json(*best[i].attribution).c_str() : "null");
    if (best[i].attribution)
      std::fprintf(stderr, "%s, where a logged step went (us):\n%s", schedules[i].c_str(),
                   pp::format_attribution(*best[i].attribution).c_str());
    if (ideal > 0) worst_share = std::min(worst_share, speedup / ideal);
  }
  std::printf(
      "{\"bench\": \"stage_parallel\", \"width\": %lld, \"blocks\": %lld, \"batch\": %lld, "
      "\"microbatches\": %d, \"rounds\": %d, \"unsplit_samples_per_s\": %.1f, \"worst_speedup\": "
      "%.3f, \"worst_share_of_ideal\": %.3f, \"goal\": 1.7}\n",
      static_cast<long long>(job.width), static_cast<long long>(job.blocks),
      static_cast<long long>(job.batch), job.n_microbatches, rounds, unsplit, worst, worst_share);
  return 0;
}
