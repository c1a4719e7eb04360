// Sharded data parallel's step time: the GPT of fsdp_gpt_job.h on dp 2 ranks joined in one
// process (threads), sharded with fully_shard (forward and backward prefetch of the next block)
// against replicated (the gradients averaged in one flat all-reduce after the backward).
//
//   ./build/bench/bench_fsdp_step [--dp 2] [--width 128] [--layers 4] [--steps 8]
//
// The figure: "ratio", the replicated step time over the sharded one (median over steps after a
// warm-up step, rank 0's; higher is better, goal >= 0.87, i.e. sharded at most 1.15 times as
// slow). Pure data parallel on one process, not the 2 x 2 mesh; the share of the
// all-gather hidden behind compute is not measured yet. Prints JSON lines.
#include <cstdio>

#include "fsdp_gpt_job.h"
#include "gpt_memory_job.h"

namespace {

int run(int argc, char** argv) {
  bench::FsdpJob job;
  job.dp = 2;
  job.steps = 8;
  bench::read_positive_flags(argc, argv,
                             {{"--dp", [&](long v) { job.dp = static_cast<int>(v); }},
                              {"--width", [&](long v) { job.width = v; }},
                              {"--layers", [&](long v) { job.layers = v; }},
                              {"--steps", [&](long v) { job.steps = static_cast<int>(v); }}});
  double seconds[2] = {0, 0};
  for (bool sharded : {false, true}) {
    job.sharded = sharded;
    const auto ranks = bench::run_fsdp_job(job);
    seconds[sharded] = bench::median(ranks[0].step_seconds);
    std::printf("{\"side\": \"%s\", \"median_step_s\": %.5f}\n",
                sharded ? "fully_shard" : "replicated", seconds[sharded]);
  }
  std::printf(
      "{\"bench\": \"fsdp_step\", \"dp\": %d, \"width\": %lld, \"layers\": %lld, "
      "\"replicated_step_s\": %.5f, \"sharded_step_s\": %.5f, \"ratio\": %.4f}\n",
      job.dp, static_cast<long long>(job.width), static_cast<long long>(job.layers), seconds[0],
      seconds[1], seconds[0] / seconds[1]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::run_reporting("bench_fsdp_step", run, argc, argv); }
