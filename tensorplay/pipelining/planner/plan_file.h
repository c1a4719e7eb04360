// A chosen plan as a file: what to run (schedule, cut, microbatches, recomputation, threads, the
// order as CSV) and what the simulator predicted; written by tp-plan, read by pp::load_plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorplay/pipelining/planner/plan.h"
#include "tensorplay/pipelining/planner/profile.h"
#include "tensorplay/pipelining/recompute.h"
#include "tensorplay/pipelining/split_point.h"
#include "tensorplay/schedules/schedule_kind.h"

namespace tensorplay::pipelining {

/// A plan, as saved (format "tensorplay-plan", version 1).
struct Plan {
  std::string model;  ///< the profiled model's name
  schedules::ScheduleKind schedule = schedules::ScheduleKind::OneFOneB;
  int ranks = 1;
  int stages_per_rank = 1;
  int n_microbatches = 1;
  int64_t batch = 1;  ///< samples per step the plan was made for
  /// The profiled model's split candidates (the first segment's is ""), to check a model against.
  std::vector<std::string> segments;
  /// Per stage after the first: the split candidate it begins at.
  std::vector<std::string> split;
  std::vector<bool> recompute;  ///< per stage
  int threads = 1;              ///< product threads of each stage
  double predicted_step_seconds = 0;
  double predicted_bubble = 0;
  std::vector<double> predicted_peak_bytes;  ///< per rank
  std::string order_csv;                     ///< the schedule's compute order, PyTorch's CSV

  int num_stages() const { return ranks * stages_per_rank; }
  /// The split_spec of pipeline(): a cut at the beginning of each stage's first candidate.
  SplitSpec split_spec() const;
  /// Stage `s`'s recomputation (full or none).
  RecomputePolicy recompute_policy(int s) const;
};

/// The plan of `choice` on `profile` for `batch` samples per step.
Plan make_plan(const Profile& profile, const PlanChoice& choice, int64_t batch);
/// JSON text of a plan.
std::string plan_to_json(const Plan& plan);
/// The inverse; throws std::invalid_argument naming a missing or bad field.
Plan plan_from_json(const std::string& text);
/// Writes the plan's JSON to `path` (std::runtime_error when it cannot).
void save_plan(const Plan& plan, const std::string& path);
/// Reads a plan file; errors name the file.
Plan load_plan(const std::string& path);

/// Checks `plan` against the model and job at hand: `candidates` are the model's split candidates
/// (the names a cut may begin at), `world` the ranks there are, `batch` the samples per step.
/// Throws std::invalid_argument naming each mismatch (a block the model lacks, a stage count the
/// world cannot hold, a batch the microbatches do not divide) and what to do.
void check_plan(const Plan& plan, const std::vector<std::string>& candidates, int world,
                int64_t batch);

}  // namespace tensorplay::pipelining
