// Sharded data parallel's state memory: a small GPT (4 blocks of width 128, vocabulary 512) on
// dp 4 ranks joined in one process (threads), sharded with fully_shard (each block, then the
// root) against replicated, after a few AdamW steps: each rank's parameter, gradient and
// optimizer-state bytes, as they are held between steps.
//
//   ./build/bench/bench_fsdp_memory [--dp 4] [--width 128] [--layers 4] [--steps 3]
//
// The figure: "state_ratio", the sharded rank's bytes over the replicated rank's (the largest
// over ranks; goal <= 0.30, ideal 1 / dp, above it by the padding of dims 0 not divisible by dp).
// Pure data parallel on one process: the pp 2 x dp 4 layout and the memory model's
// prediction are not measured yet. Prints JSON lines.
#include <cstdio>

#include "fsdp_gpt_job.h"
#include "gpt_memory_job.h"

namespace {

int run(int argc, char** argv) {
  bench::FsdpJob job;
  job.steps = 3;
  bench::read_positive_flags(argc, argv,
                             {{"--dp", [&](long v) { job.dp = static_cast<int>(v); }},
                              {"--width", [&](long v) { job.width = v; }},
                              {"--layers", [&](long v) { job.layers = v; }},
                              {"--steps", [&](long v) { job.steps = static_cast<int>(v); }}});
  size_t worst[2] = {0, 0};
  for (bool sharded : {false, true}) {
    job.sharded = sharded;
    const auto ranks = bench::run_fsdp_job(job);
    for (size_t r = 0; r < ranks.size(); ++r) {
      const auto& f = ranks[r];
      std::printf(
          "{\"side\": \"%s\", \"rank\": %zu, \"param_bytes\": %zu, \"grad_bytes\": %zu, "
          "\"optimizer_bytes\": %zu, \"state_bytes\": %zu}\n",
          sharded ? "fully_shard" : "replicated", r, f.param_bytes, f.grad_bytes, f.optimizer_bytes,
          f.state_bytes());
      worst[sharded] = std::max(worst[sharded], f.state_bytes());
    }
  }
  std::printf(
      "{\"bench\": \"fsdp_memory\", \"dp\": %d, \"width\": %lld, \"layers\": %lld, "
      "\"replicated_state_bytes\": %zu, \"sharded_state_bytes\": %zu, \"state_ratio\": %.4f, "
      "\"ideal\": %.4f}\n",
      job.dp, static_cast<long long>(job.width), static_cast<long long>(job.layers), worst[0],
      worst[1], static_cast<double>(worst[1]) / static_cast<double>(worst[0]), 1.0 / job.dp);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_reporting("bench_fsdp_memory", run, argc, argv);
}
