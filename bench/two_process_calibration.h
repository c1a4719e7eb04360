// The two-process mode calibrated as calibrate_profile calibrates the embedded runtime: the MLP's
// pipeline in two processes once more with each rank's message log, fitted by fit_calibration.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "mlp_pipeline_job.h"
#include "tensorplay/observe/trace_log.h"
#include "tensorplay/pipelining/planner/calibrate.h"

namespace bench {

/// Each rank's message log in `dir` (messages_rank_R.log, as TENSORPLAY_LOG_DIR names them),
/// read as one job's log.
inline pp::JobLog read_rank_logs(const std::filesystem::path& dir) {
  std::vector<pp::MessageLogRuns> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("messages_rank_", 0) != 0) continue;
    std::ifstream in(entry.path());
    files.push_back({entry.path().string(), pp::parse_log_runs(in)});
  }
  if (files.size() != 2)
    throw std::runtime_error("two-process calibration: " + std::to_string(files.size()) +
                             " rank logs in " + dir.string() + ", expected 2");
  return pp::read_job_log(files, 0);
}

/// The fastest timed step of `log` (after the job's `warmup` steps): its actions in seconds, its
/// makespan the actions' span (the workers' steps include their optimizer's, which it leaves
/// out, as the fit wants).
inline tp::schedules::SimulationResult fastest_logged_step(const pp::JobLog& log, int warmup) {
  const std::vector<uint64_t> steps = pp::complete_steps(log);
  if (steps.size() <= static_cast<size_t>(warmup))
    throw std::runtime_error("two-process calibration: the logs hold " +
                             std::to_string(steps.size()) + " whole steps, none after the warm-up");
  tp::schedules::SimulationResult best;
  best.makespan = 1e300;
  for (size_t i = static_cast<size_t>(warmup); i < steps.size(); ++i) {
    tp::schedules::SimulationResult r = pp::step_timeline(log.events, steps[i]);
    if (r.makespan < best.makespan) best = std::move(r);
  }
  for (auto& e : best.timeline) e.start *= 1e-6, e.end *= 1e-6;  // microseconds to seconds
  best.makespan *= 1e-6;
  return best;
}

/// Runs `choice` (1F1B, the MLP's even cut) of `job` in two processes under `tp_launch` with each
/// rank's message log in a scratch directory, and fits the profile's compute factor and time
/// per action to its fastest timed step for ranks in processes of their own (`request`).
inline pp::CalibrationFit fit_two_processes(const std::string& tp_launch, MlpJob job,
                                            const pp::Profile& profile,
                                            const pp::PlanRequest& request,
                                            const pp::PlanChoice& choice) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("bench_plan_logs_" + std::to_string(::getpid()));
  struct Scratch {  // removed however the run ends
    std::filesystem::path path;
    ~Scratch() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } scratch{dir};
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  job.n_microbatches = choice.n_microbatches;
  const PipelineRun run =
      launch_pipeline(tp_launch, job, std::string(tp::schedules::schedule_name(choice.schedule)),
                      "--log-dir " + shell_quote(dir.string()));
  if (!run.error.empty()) throw std::runtime_error(run.error);
  const tp::schedules::SimulationResult step = fastest_logged_step(read_rank_logs(dir), job.warmup);
  return pp::fit_calibration(profile, request, choice, step, step.makespan);
}

}  // namespace bench
