// Where the pipeline benchmarks' steps went: the schedule's ideal speed-up, and the attribution of
// logged steps (compute, bubble, hand-offs, runtime, runnable time) read back from message logs.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tensorplay/observe/step_attribution.h"
#include "tensorplay/observe/trace_log.h"
#include "tensorplay/schedules/generators.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/schedules/simulator.h"

namespace bench {

/// The speed-up over one worker that `schedule` can reach on `ranks` ranks with `microbatches`
/// microbatches when F, I and W take the same time and transfers are free: the one worker's
/// time (every action, one after another) over the simulator's makespan. 1F1B on 2 ranks and 8
/// microbatches: 2 * 8 / (8 + 1) = 1.78; ZBVZeroBubble: 1.96; Interleaved1F1B (2 stages a rank).
inline double ideal_speedup(const std::string& schedule, int ranks, int n_microbatches) {
  namespace ts = tensorplay::schedules;
  ts::PipelineOrder order;
  std::vector<int> stage_to_rank;
  if (schedule == "ZBVZeroBubble") {
    order = ts::zbv_zero_bubble_order(ranks, n_microbatches);
    for (int s = 0; s < 2 * ranks; ++s) stage_to_rank.push_back(s < ranks ? s : 2 * ranks - 1 - s);
  } else if (schedule == "Interleaved1F1B") {
    order = ts::interleaved_1f1b_order(ranks, 2, n_microbatches);
    for (int s = 0; s < 2 * ranks; ++s) stage_to_rank.push_back(s % ranks);
  } else if (schedule == "1F1B") {
    order = ts::one_f_one_b_order(ranks, n_microbatches);
    for (int s = 0; s < ranks; ++s) stage_to_rank.push_back(s);
  } else {
    return 0;  // not one the benchmarks name an ideal for
  }
  // The whole model's F, I and W take 1 each; a stage's, 1 over the stages.
  const double per_stage = 1.0 / static_cast<double>(stage_to_rank.size());
  const auto costs = ts::CostModel::uniform(per_stage, per_stage, per_stage);
  const double makespan =
      ts::simulate_order(order, stage_to_rank, n_microbatches, costs, {.record_timeline = false})
          .makespan;
  return 3.0 * n_microbatches / makespan;
}

/// The mean attribution of the last `steps` training steps of the message logs in `dir` (one
/// file per rank, as TENSORPLAY_LOG_DIR writes them). Throws naming the folder when it holds no
/// logs or no step whole in every rank's log.
inline tensorplay::pipelining::StepAttribution attribute_logs(const std::string& dir, int steps) {
  namespace pp = tensorplay::pipelining;
  std::vector<pp::MessageLogRuns> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("messages_rank_", 0) != 0) continue;
    std::ifstream in(entry.path());
    files.push_back({entry.path().string(), pp::parse_log_runs(in)});
  }
  if (files.empty()) throw std::runtime_error("no message logs in " + dir);
  const pp::JobLog log = pp::read_job_log(files);
  const std::vector<uint64_t> whole = pp::complete_steps(log);
  std::vector<pp::StepAttribution> attributed;
  for (auto it = whole.rbegin(); it != whole.rend() && static_cast<int>(attributed.size()) < steps;
       ++it)
    attributed.push_back(pp::attribute_step(log.events, *it));
  if (attributed.empty()) throw std::runtime_error("no step whole in every rank's log in " + dir);
  return pp::mean_attribution(attributed);
}

/// The attribution's figures as JSON fields named for `schedule` ("1f1b", "zbv"), to add to a
/// benchmark's last line: the ideal makespan and the largest of each part over the ranks.
inline std::string attribution_fields(const std::string& name,
                                      const tensorplay::pipelining::StepAttribution& a) {
  return "\"attribution_" + name + "\":" + tensorplay::pipelining::attribution_json(a);
}

}  // namespace bench
