// Pipeline speed-up across processes: the MLP job of mlp_pipeline_job.h in 2 processes of one BLAS
// thread each, under Schedule1F1B and ScheduleZBVZeroBubble, over the same job in one process.
//
//   ./build/bench/bench_pipeline_procs [--steps 20] [--warmup 3] [--rounds 1] [--tp-launch PATH]
//                                      [--attribution-steps 5]
//                                      [--width 1024 --blocks 8 --batch 128 --microbatches 8]
//
// The job: 8 blocks Linear(1024, 1024) + ReLU, batch 128 in 8 microbatches, SGD, MSE loss. 1F1B
// runs 2 stages (cut at blocks.4), ZBV 4 stages of 2 blocks (rank r holds stages r and 3 - r).
// The one-process baseline runs on one thread without a pipeline: the microbatches' forward and
// backward one after another, accumulating gradients (the same products the stages run); the
// whole batch at once is reported beside it. The two ranks are copies of this executable in
// worker mode, started by tp-launch (found beside the build's bench folder, or --tp-launch, or
// TENSORPLAY_TP_LAUNCH). Prints JSON lines; the last one holds the samples/s of each and "ratio",
// the smaller of the two pipelines' samples/s over the one-process samples/s (1F1B's ideal for 2
// ranks and 8 microbatches is 2 * 8 / (8 + 1) = 1.78, ZBV's 1.96: "ideal_*", and "share_of_ideal_*"
// the ratio over it). Best of --rounds for each figure. After the timed steps each rank runs
// --attribution-steps more with the message log on; their mean attribution (compute, the
// schedule's bubble, hand-offs, runtime, the compute thread's runnable time; step_attribution.h)
// is printed per rank on standard error and as "attribution_1f1b"/"attribution_zbv".
#include <algorithm>
#include <iostream>
#include <map>
#include <string>

#include "mlp_pipeline_job.h"

int main(int argc, char** argv) {
  if (bench::is_worker(argc, argv)) return bench::worker_main(argc, argv);

  bench::MlpJob job;
  int rounds = 1, attribution_steps = 5;
  std::string tp_launch_flag;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rounds") {
      rounds = std::stoi(value);
    } else if (flag == "--attribution-steps") {
      attribution_steps = std::stoi(value);
    } else if (flag == "--tp-launch") {
      tp_launch_flag = value;
    } else if (!job.parse_flag(flag, value)) {
      std::cerr << "unknown flag " << flag
                << " (known: --rounds, --attribution-steps, --tp-launch, and the job's "
                << job.flags() << ")\n";
      return 2;
    }
  }
  std::string tp_launch;
  if (!bench::locate_tp_launch(tp_launch_flag, tp_launch)) return 1;

  double one_process = 0, whole_batch = 0, one_f_one_b = 0, zbv = 0;
  std::map<std::string, tensorplay::pipelining::StepAttribution> attribution;  // of the best run
  for (int round = 0; round < rounds; ++round) {
    double mb = bench::one_process_samples_per_s(job);
    double whole = bench::one_process_samples_per_s(job, /*whole_batch=*/true);
    one_process = std::max(one_process, mb);
    whole_batch = std::max(whole_batch, whole);
    std::cout << "{\"round\":" << round << ",\"run\":\"1proc\",\"samples_per_s\":" << mb
              << ",\"samples_per_s_whole_batch\":" << whole << "}" << std::endl;
    for (const char* schedule : {"1F1B", "ZBVZeroBubble"}) {
      bench::PipelineRun run =
          bench::launch_pipeline(tp_launch, job, schedule, "", attribution_steps);
      if (!run.error.empty()) {
        std::cout << "{\"round\":" << round << ",\"run\":\"" << schedule
                  << "\",\"error\":\"two-process run failed: see standard error\"}" << std::endl;
        std::cerr << run.error;
        return 1;
      }
      double& best = std::string(schedule) == "1F1B" ? one_f_one_b : zbv;
      if (run.samples_per_s > best && run.attribution) attribution[schedule] = *run.attribution;
      best = std::max(best, run.samples_per_s);
      for (const std::string& line : run.rank_lines)
        std::cout << "{\"round\":" << round << ",\"run\":\"" << schedule << "\"," << line.substr(1)
                  << std::endl;
      if (run.attribution) {
        std::cout << "{\"round\":" << round << ",\"run\":\"" << schedule << "\",\"attribution\":"
                  << tensorplay::pipelining::attribution_json(*run.attribution) << "}" << std::endl;
        std::cerr << schedule << ", where a logged step went (us; its wall time, optimizer "
                  << "included: "
                  << 1e6 * bench::json_number(run.result_line, "logged_step_seconds").value_or(0)
                  << "):\n"
                  << tensorplay::pipelining::format_attribution(*run.attribution);
      } else if (!run.attribution_error.empty()) {
        std::cerr << schedule << ": no attribution: " << run.attribution_error << "\n";
      }
    }
  }
  const double ratio_1f1b = one_f_one_b / one_process, ratio_zbv = zbv / one_process;
  const double ideal_1f1b = bench::ideal_speedup("1F1B", 2, job.n_microbatches),
               ideal_zbv = bench::ideal_speedup("ZBVZeroBubble", 2, job.n_microbatches);
  // The baseline accumulates microbatches, doing the very products the pipeline does; the
  // whole-batch figure (larger, more efficient products) is reported beside it.
  std::cout << "{\"bench\":\"bench_pipeline_procs\",\"samples_per_s_1proc\":" << one_process
            << ",\"samples_per_s_1f1b\":" << one_f_one_b << ",\"samples_per_s_zbv\":" << zbv
            << ",\"ratio_1f1b\":" << ratio_1f1b << ",\"ratio_zbv\":" << ratio_zbv
            << ",\"ratio\":" << std::min(ratio_1f1b, ratio_zbv) << ",\"ideal_1f1b\":" << ideal_1f1b
            << ",\"ideal_zbv\":" << ideal_zbv
            << ",\"share_of_ideal_1f1b\":" << ratio_1f1b / ideal_1f1b
            << ",\"share_of_ideal_zbv\":" << ratio_zbv / ideal_zbv
            << ",\"samples_per_s_1proc_whole_batch\":" << whole_batch
            << ",\"ratio_1f1b_vs_whole_batch\":" << one_f_one_b / whole_batch
            << ",\"width\":" << job.width << ",\"blocks\":" << job.blocks
            << ",\"batch\":" << job.batch << ",\"microbatches\":" << job.n_microbatches
            << ",\"processes\":2,\"threads_per_process\":1,\"steps\":" << job.steps
            << ",\"warmup\":" << job.warmup << ",\"rounds\":" << rounds;
  for (const auto& [schedule, a] : attribution)
    std::cout << "," << bench::attribution_fields(schedule == "1F1B" ? "1f1b" : "zbv", a);
  std::cout << "}" << std::endl;
  return 0;
}
