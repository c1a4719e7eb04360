// Our two-process pipeline against PyTorch's torch.distributed.pipelining on the same job
// (mlp_pipeline_job.h here, pipeline_pytorch.py there), each process on one thread.
//
//   ./build/bench/bench_pipeline_vs_pytorch [--rounds 1] [--steps 20] [--small-steps 100]
//                                           [--tp-launch PATH]
//
// Schedule1F1B and ScheduleZBVZeroBubble, at width 1024 with 8 microbatches (compute dominates)
// and at width 64 with 32 microbatches (per-message costs dominate). Each side is also timed in
// one process on one thread without a pipeline, which gives its pipeline efficiency. The PyTorch
// side runs under the interpreter python_peer.h finds (TENSORPLAY_PYTHON, a torch-venv beside
// this executable, python3), installing pip's torch into that venv when none has it. Prints JSON
// lines; the last one holds "ratio", the smallest of our samples/s over PyTorch's, and each
// side's efficiency. Best of --rounds for each figure; exits 1 when PyTorch is not available.
#include <algorithm>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "mlp_pipeline_job.h"
#include "python_peer.h"

#ifndef TENSORPLAY_SOURCE_DIR
#define TENSORPLAY_SOURCE_DIR "."
#endif

namespace {

const std::vector<std::string> kSchedules = {"1F1B", "ZBVZeroBubble"};

/// One shape of the job and the ratio of ours over PyTorch it should reach.
struct Config {
  std::string name;  ///< suffix of the summary's keys: "w1024", "w64"
  bench::MlpJob job;
  double goal;
};

/// Best samples/s of one side: "1proc" and each schedule.
using Figures = std::map<std::string, double>;

/// Samples/s of PyTorch's run of `job` under `schedule` ("1proc" for one process), or an error.
bench::PipelineRun run_pytorch(const std::string& python, const bench::MlpJob& job,
                               const std::string& schedule) {
  bench::CommandOutput out = bench::run_command(
      bench::shell_quote(python) + " " +
      bench::shell_quote(std::string(TENSORPLAY_SOURCE_DIR) + "/bench/pipeline_pytorch.py") +
      " --schedule " + bench::shell_quote(schedule) + " " + job.flags() + " 2>&1");
  bench::PipelineRun run;
  for (const std::string& line : out.lines) {
    if (line.rfind("{\"", 0) != 0 || line.find("\"side\":\"pytorch\"") == std::string::npos)
      continue;
    run.result_line = line;
    run.samples_per_s = bench::json_number(line, "samples_per_s").value_or(0);
  }
  if (out.exit_code != 0 || run.samples_per_s <= 0) {
    run.error = "PyTorch's " + schedule + " run failed (exit code " +
                std::to_string(out.exit_code) + "); its last lines:\n" + bench::tail_of(out);
  }
  return run;
}

void keep_best(Figures& figures, const std::string& key, double samples_per_s) {
  figures[key] = std::max(figures[key], samples_per_s);
}

}  // namespace

int main(int argc, char** argv) {
  if (bench::is_worker(argc, argv)) return bench::worker_main(argc, argv);

  Config large{"w1024", {}, 1.3};
  Config small{"w64", {.width = 64, .n_microbatches = 32, .steps = 100, .warmup = 10}, 5.0};
  int rounds = 1;
  std::string tp_launch_flag;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rounds")
      rounds = std::stoi(value);
    else if (flag == "--steps")
      large.job.steps = std::stoi(value);
    else if (flag == "--small-steps")
      small.job.steps = std::stoi(value);
    else if (flag == "--tp-launch")
      tp_launch_flag = value;
    else {
      std::cerr << "unknown flag " << flag
                << " (known: --rounds, --steps, --small-steps, --tp-launch)\n";
      return 2;
    }
  }

  bench::PythonPeer peer = bench::find_python_with_torch();
  if (peer.python.empty()) {
    std::cout << "{\"bench\":\"bench_pipeline_vs_pytorch\",\"pytorch\":\"missing\",\"detail\":"
              << bench::json_quote(peer.problem) << ",\"ratio\":null}" << std::endl;
    std::cerr << "PyTorch is not available, so there is nothing to compare against: "
              << peer.problem << "\n";
    return 1;
  }
  std::string tp_launch;
  if (!bench::locate_tp_launch(tp_launch_flag, tp_launch)) return 1;
  std::cout << "{\"pytorch\":" << bench::json_quote(peer.torch_version)
            << ",\"python\":" << bench::json_quote(peer.python) << "}" << std::endl;

  std::ostringstream summary;
  double worst_ratio = 1e300;
  for (const Config& config : {large, small}) {
    Figures ours, theirs;
    for (int round = 0; round < rounds; ++round) {
      for (const std::string& schedule : {std::string("1proc"), kSchedules[0], kSchedules[1]}) {
        bench::PipelineRun mine =
            schedule == "1proc"
                ? bench::PipelineRun{.samples_per_s = bench::one_process_samples_per_s(config.job)}
                : bench::launch_pipeline(tp_launch, config.job, schedule);
        bench::PipelineRun peers = mine.error.empty()
                                       ? run_pytorch(peer.python, config.job, schedule)
                                       : bench::PipelineRun{};
        if (!mine.error.empty() || !peers.error.empty()) {
          std::cerr << mine.error << peers.error;
          return 1;
        }
        keep_best(ours, schedule, mine.samples_per_s);
        keep_best(theirs, schedule, peers.samples_per_s);
        std::cout << "{\"config\":\"" << config.name << "\",\"round\":" << round
                  << ",\"schedule\":\"" << schedule
                  << "\",\"ours_samples_per_s\":" << mine.samples_per_s
                  << ",\"pytorch_samples_per_s\":" << peers.samples_per_s << "}" << std::endl;
      }
    }
    std::cout << "{\"config\":\"" << config.name << "\",\"width\":" << config.job.width
              << ",\"microbatches\":" << config.job.n_microbatches << ",\"goal\":" << config.goal;
    for (const std::string& schedule : kSchedules) {
      const std::string key = schedule == "1F1B" ? "1f1b" : "zbv";
      const double ratio = ours[schedule] / theirs[schedule];
      worst_ratio = std::min(worst_ratio, ratio);
      std::ostringstream figures;
      figures << ",\"ratio_" << key << "_" << config.name << "\":" << ratio << ",\"ours_efficiency_"
              << key << "_" << config.name << "\":" << ours[schedule] / ours["1proc"]
              << ",\"pytorch_efficiency_" << key << "_" << config.name
              << "\":" << theirs[schedule] / theirs["1proc"];
      summary << figures.str();
      std::cout << figures.str() << ",\"ours_samples_per_s_" << key << "\":" << ours[schedule]
                << ",\"pytorch_samples_per_s_" << key << "\":" << theirs[schedule];
    }
    std::cout << ",\"ours_samples_per_s_1proc\":" << ours["1proc"]
              << ",\"pytorch_samples_per_s_1proc\":" << theirs["1proc"] << "}" << std::endl;
  }
  std::cout << "{\"bench\":\"bench_pipeline_vs_pytorch\",\"ratio\":" << worst_ratio << summary.str()
            << ",\"pytorch\":\"" << peer.torch_version
            << "\",\"processes\":2,\"threads_per_process\":1,\"rounds\":" << rounds << "}"
            << std::endl;
  return 0;
}
