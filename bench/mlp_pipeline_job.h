// The job the pipeline benchmarks time: an MLP of blocks Linear(width, width) + ReLU trained with
// SGD on an MSE loss, in one process on one thread, or as one rank of a two-process pipeline.
#pragma once

#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_knobs.h"
#include "command_output.h"
#include "pipeline_attribution.h"
#include "tensorplay/base/knobs.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/observe/message_log.h"
#include "tensorplay/observe/thread_times.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace bench {

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

// -- the job --------------------------------------------------------------------------------------

/// Shapes and step counts; the same on both sides of every comparison.
struct MlpJob {
  int64_t width = 1024;
  int64_t blocks = 8;
  int64_t batch = 128;
  int n_microbatches = 8;
  int steps = 20;  ///< timed steps
  int warmup = 3;  ///< untimed steps before them
  float lr = 0.01f;

  double samples() const { return static_cast<double>(batch) * steps; }
  /// The flags that reproduce this job on a worker's or a peer script's command line.
  std::string flags() const {
    std::ostringstream out;
    out << "--width " << width << " --blocks " << blocks << " --batch " << batch
        << " --microbatches " << n_microbatches << " --steps " << steps << " --warmup " << warmup;
    return out.str();
  }
  /// Takes one of flags()'s pairs; false when `flag` is not one of them.
  bool parse_flag(const std::string& flag, const std::string& value) {
    if (flag == "--width")
      width = std::stoll(value);
    else if (flag == "--blocks")
      blocks = std::stoll(value);
    else if (flag == "--batch")
      batch = std::stoll(value);
    else if (flag == "--microbatches")
      n_microbatches = std::stoi(value);
    else if (flag == "--steps")
      steps = std::stoi(value);
    else if (flag == "--warmup")
      warmup = std::stoi(value);
    else
      return false;
    return true;
  }
};

/// blocks.0 ... blocks.N-1, each Sequential(Linear, ReLU), as torch.nn would spell it.
struct MlpImpl : tp::nn::Module {
  MlpImpl(int64_t width, int64_t n_blocks) {
    blocks = register_module("blocks", tp::nn::ModuleList());
    for (int64_t i = 0; i < n_blocks; ++i)
      blocks->push_back(tp::nn::Sequential(tp::nn::Linear(width, width), tp::nn::ReLU()));
  }
  tp::Tensor forward(const tp::Tensor& x) override {
    tp::Tensor h = x;
    for (const auto& block : *blocks) h = (*block)(h);
    return h;
  }
  std::string type_name() const override { return "Mlp"; }
  tp::nn::ModuleList blocks{nullptr};
};
TENSORPLAY_MODULE(Mlp);

/// The same batch on every rank and in every run.
struct MlpData {
  tp::Tensor x, y;
  explicit MlpData(const MlpJob& job) {
    tp::Generator gen(7);
    x = tp::randn({job.batch, job.width}, {}, &gen);
    y = tp::randn({job.batch, job.width}, {}, &gen);
  }
};

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// CPU seconds this process has used, all its threads together: beside the wall time it tells
/// waiting (for a peer, or for a core other work holds) from computing.
inline double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// -- one process, one thread ----------------------------------------------------------------------

/// Samples per second of the job in this process on one BLAS thread, without a pipeline. With
/// `whole_batch` false each step runs forward and backward of one microbatch after another,
/// accumulating gradients as the pipeline does (the same products, each loss scaled by
/// 1/microbatches); with it true, the whole batch at once. Then the SGD step.
inline double one_process_samples_per_s(const MlpJob& job, bool whole_batch = false) {
  openblas_set_num_threads(1);
  tp::set_default_num_threads(1);
  tp::manual_seed(0);
  Mlp model(job.width, job.blocks);
  tp::optim::SGD opt(model->parameters(), {.lr = job.lr});
  MlpData data(job);
  const int n = whole_batch ? 1 : job.n_microbatches;
  const int64_t rows = job.batch / n;
  auto step = [&] {
    for (int mb = 0; mb < n; ++mb) {
      tp::Tensor x = data.x.slice0(mb * rows, (mb + 1) * rows);
      tp::Tensor y = data.y.slice0(mb * rows, (mb + 1) * rows);
      (tp::nn::mse_loss(model(x), y) * (1.0f / static_cast<float>(n))).backward();
    }
    opt.step();
    opt.zero_grad();
  };
  for (int i = 0; i < job.warmup; ++i) step();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < job.steps; ++i) step();
  return job.samples() / seconds_since(start);
}

// -- one rank of the pipeline ---------------------------------------------------------------------

/// Cuts the model into `num_stages` stages of equal numbers of blocks.
inline pp::Pipe split_mlp(Mlp& model, const MlpJob& job, int num_stages) {
  if (job.blocks % num_stages != 0)
    throw std::invalid_argument(std::to_string(job.blocks) + " blocks do not divide into " +
                                std::to_string(num_stages) + " stages");
  pp::SplitSpec spec;
  for (int s = 1; s < num_stages; ++s)
    spec["blocks." + std::to_string(s * job.blocks / num_stages)] = pp::SplitPoint::Beginning;
  return pp::pipeline(model, {tp::zeros({job.batch / job.n_microbatches, job.width})},
                      {.split_spec = spec});
}

/// Runs this process's rank of the job under `schedule` (started by the launcher, which set the
/// rank's environment) and prints one JSON result line; the rank hosting the last stage times
/// from after a barrier that follows the warm-up steps to the end of the last step. The line
/// holds what each of the process's threads did over the timed steps (CPU and runnable time, by
/// thread name). With `log_dir`, `log_steps` more steps then run with the message log written
/// to log_dir/messages_rank_R.log, for the attribution (the timed steps run without it).
inline int run_worker(const MlpJob& job, const std::string& schedule,
                      const std::string& log_dir = "", int log_steps = 0) {
  namespace dist = tp::distributed;
  openblas_set_num_threads(1);
  tp::set_default_num_threads(1);
  dist::init_process_group({.timeout = std::chrono::seconds(60)});
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const auto kind = tp::schedules::parse_schedule_kind(schedule);
  const int num_stages = world * tp::schedules::default_stages_per_rank(kind);

  tp::manual_seed(0);
  Mlp model(job.width, job.blocks);
  pp::Pipe pipe = split_mlp(model, job, num_stages);
  auto stages = pp::build_stages(pipe, pp::stages_of_rank(kind, rank, num_stages), tp::cpu(),
                                 dist::world_group());
  pp::PipelineSchedule pipeline(stages, job.n_microbatches, tp::nn::mse_loss, kind,
                                {.step_timeout = std::chrono::seconds(60)});
  tp::optim::SGD opt(pp::parameters(stages), {.lr = job.lr});
  MlpData data(job);
  bool hosts_first = false, hosts_last = false;
  for (const auto& stage : stages) {
    hosts_first = hosts_first || stage->is_first();
    hosts_last = hosts_last || stage->is_last();
  }
  std::vector<tp::Tensor> losses;
  auto step = [&] {
    losses.clear();
    pipeline.step(hosts_first ? std::vector<tp::Tensor>{data.x} : std::vector<tp::Tensor>{},
                  {.target = data.y, .losses = &losses});
    opt.step();
    opt.zero_grad();
  };
  for (int i = 0; i < job.warmup; ++i) step();
  dist::barrier();
  const auto threads_before = pp::process_thread_times();
  auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  double best_step = 1e300;  // the fastest step, as the embedded benchmarks time theirs
  for (int i = 0; i < job.steps; ++i) {
    const auto step_start = std::chrono::steady_clock::now();
    step();
    best_step = std::min(best_step, seconds_since(step_start));
  }
  const double seconds = seconds_since(start), cpu_seconds = process_cpu_seconds() - cpu_start;
  const auto threads = pp::thread_times_since(threads_before, pp::process_thread_times());
  double logged_step_seconds = 0;  // the logged steps' mean wall time, optimizer included
  if (!log_dir.empty() && log_steps > 0) {
    pp::log_to_file(log_dir + "/messages_rank_" + std::to_string(rank) + ".log");
    dist::barrier();
    const auto logged_start = std::chrono::steady_clock::now();
    for (int i = 0; i < log_steps; ++i) step();
    logged_step_seconds = seconds_since(logged_start) / log_steps;
  }

  float loss = 0;
  for (const auto& l : losses) loss += l.item() / static_cast<float>(losses.size());
  std::cout << "{\"result\":\"mlp_pipeline\",\"schedule\":\"" << schedule << "\",\"rank\":" << rank
            << ",\"hosts_last_stage\":" << (hosts_last ? "true" : "false")
            << ",\"stages\":" << stages.size() << ",\"steps\":" << job.steps
            << ",\"seconds\":" << seconds << ",\"cpu_seconds\":" << cpu_seconds
            << ",\"samples_per_s\":" << job.samples() / seconds
            << ",\"best_step_seconds\":" << best_step
            << ",\"threads\":" << pp::thread_times_json(threads);
  if (logged_step_seconds > 0) std::cout << ",\"logged_step_seconds\":" << logged_step_seconds;
  if (hosts_last) std::cout << ",\"loss\":" << loss;
  std::cout << "}" << std::endl;
  return 0;
}

/// Worker mode: `--worker --schedule NAME` and the job's flags. Returns the exit code.
inline int worker_main(int argc, char** argv) {
  MlpJob job;
  std::string schedule = "1F1B", log_dir;
  int log_steps = 0;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string flag = argv[i];
      if (flag == "--worker") continue;
      if (i + 1 >= argc) throw std::invalid_argument("flag " + flag + " needs a value");
      std::string value = argv[++i];
      if (flag == "--schedule")
        schedule = value;
      else if (flag == "--attribution-log")
        log_dir = value;
      else if (flag == "--attribution-steps")
        log_steps = std::stoi(value);
      else if (!job.parse_flag(flag, value))
        throw std::invalid_argument("unknown worker flag " + flag);
    }
    return run_worker(job, schedule, log_dir, log_steps);
  } catch (const std::exception& e) {
    std::cout << "worker rank " << tp::distributed::get_rank() << " failed: " << e.what()
              << std::endl;
    return 1;
  }
}

inline bool is_worker(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--worker") return true;
  return false;
}

// -- starting the two ranks -----------------------------------------------------------------------

/// The launcher: `flag_value` when given, else $TENSORPLAY_TP_LAUNCH, else the one built beside
/// this benchmark (build/tools/tp-launch/tp-launch for build/bench/<name>), else tp-launch on the
/// PATH. Throws naming where it looked.
inline std::string find_tp_launch(const std::string& flag_value = "") {
  auto must_exist = [](const std::string& path, const char* from) {
    if (!std::filesystem::exists(path))
      throw std::runtime_error("tp-launch " + path + " (from " + from + ") does not exist");
    return path;
  };
  if (!flag_value.empty()) return must_exist(flag_value, "--tp-launch");
  if (std::string env = tensorplay::knob_string(kTpLaunchKnob); !env.empty())
    return must_exist(env, "TENSORPLAY_TP_LAUNCH");
  const std::filesystem::path here = std::filesystem::path(self_executable()).parent_path();
  for (const auto& candidate :
       {here / ".." / "tools" / "tp-launch" / "tp-launch", here / "tp-launch"}) {
    if (std::filesystem::exists(candidate)) return candidate.lexically_normal().string();
  }
  CommandOutput on_path = run_command("command -v tp-launch 2>/dev/null");
  if (on_path.exit_code == 0 && !on_path.lines.empty()) return on_path.lines.back();
  throw std::runtime_error("tp-launch not found beside " + here.string() +
                           " (../tools/tp-launch/tp-launch) nor on the PATH: build the tp-launch "
                           "target, or pass --tp-launch PATH or set TENSORPLAY_TP_LAUNCH");
}

/// find_tp_launch for a benchmark's main: the launcher in `out`, or false after printing why it
/// was not found.
inline bool locate_tp_launch(const std::string& flag_value, std::string& out) {
  try {
    out = find_tp_launch(flag_value);
    return true;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return false;
  }
}

/// What a two-process run measured, or why it failed.
struct PipelineRun {
  double samples_per_s = 0;
  double best_step_seconds = 0;  ///< the fastest timed step of the rank hosting the last stage
  std::string result_line;       ///< the JSON line of the rank hosting the last stage
  std::vector<std::string> rank_lines;  ///< every rank's JSON line
  /// The mean attribution of the steps run after the timed ones with the message log on (none
  /// when `attribution_steps` was 0 or the logs could not be read: `attribution_error` says why).
  std::optional<tensorplay::pipelining::StepAttribution> attribution;
  std::string attribution_error;
  std::string error;  ///< empty on success
};

/// Starts two ranks of this executable in worker mode under `tp_launch` for `schedule` and reads
/// the figure of the rank hosting the last stage from the launcher's "[rank R] " lines.
/// `launcher_flags` go to tp-launch as they are (shell words, quoted by the caller).
inline PipelineRun launch_pipeline(const std::string& tp_launch, const MlpJob& job,
                                   const std::string& schedule,
                                   const std::string& launcher_flags = "",
                                   int attribution_steps = 0) {
  std::string log_dir;
  if (attribution_steps > 0) {
    log_dir = (std::filesystem::temp_directory_path() /
               ("tensorplay_attribution_" + std::to_string(::getpid()) + "_" + schedule))
                  .string();
    std::filesystem::remove_all(log_dir);
    std::filesystem::create_directories(log_dir);
  }
  std::string command = "OPENBLAS_NUM_THREADS=1 " + shell_quote(tp_launch) +
                        " --nproc-per-node 2 --grace-seconds 2 " + launcher_flags + " -- " +
                        shell_quote(self_executable()) + " --worker --schedule " +
                        shell_quote(schedule) + " " + job.flags();
  if (!log_dir.empty())
    command += " --attribution-log " + shell_quote(log_dir) + " --attribution-steps " +
               std::to_string(attribution_steps);
  CommandOutput out = run_command(command + " 2>&1");
  PipelineRun run;
  for (const std::string& line : out.lines) {
    size_t json = line.find("{\"result\":\"mlp_pipeline\"");
    if (json != std::string::npos) run.rank_lines.push_back(line.substr(json));
    if (json == std::string::npos || line.find("\"hosts_last_stage\":true") == std::string::npos)
      continue;
    run.result_line = line.substr(json);
    run.samples_per_s = json_number(run.result_line, "samples_per_s").value_or(0);
    run.best_step_seconds = json_number(run.result_line, "best_step_seconds").value_or(0);
  }
  if (out.exit_code != 0 || run.samples_per_s <= 0) {
    run.error = "the two-process " + schedule + " run failed (exit code " +
                std::to_string(out.exit_code) + "); its last lines:\n" + tail_of(out);
  }
  if (!log_dir.empty() && run.error.empty()) {
    try {
      run.attribution = attribute_logs(log_dir, attribution_steps);
    } catch (const std::exception& e) {
      run.attribution_error = e.what();
    }
  }
  if (!log_dir.empty()) std::filesystem::remove_all(log_dir);
  return run;
}

}  // namespace bench
