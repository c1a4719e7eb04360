// train_gpt's --plan and --profile-out: profiling its GPT, planning it, and turning a plan into
// the options it sets (schedule, stages, microbatches, threads) plus the cut and recomputation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "options.h"
#include "tensorplay/pipelining/planner/plan_file.h"
#include "tensorplay/pipelining/planner/profile.h"

namespace train_gpt {

/// The name a profile of the GPT of `o` gives its model (plans carry it, and --plan checks it).
std::string profile_model_name(const Options& o);

/// Where a stage of the GPT may begin: every block, and ln_f (the head on its own).
std::vector<std::string> split_candidates(const Options& o);

/// Profiles the GPT of `o` (vocabulary `vocab`) on one microbatch of the configured size.
tensorplay::pipelining::Profile profile_gpt(const Options& o, int64_t vocab);

/// The plan --plan names: "auto" profiles and plans here (in one process: 2 ranks of the embedded
/// runtime, transfers over the in-process channel; under tp-launch, `world` must be the job's:
/// rank 0 profiles and plans for world / dp ranks in processes of their own, transfers over the
/// profile's UCX channel, and every rank runs that plan), else the file is loaded. The plan is
/// checked against the model and the job (a mismatch is std::invalid_argument naming it), and `o`'s
/// schedule, stages, microbatches and BLAS threads are set from it. Empty when --plan is not given.
std::optional<tensorplay::pipelining::Plan> resolve_plan(Options& o, int64_t vocab, int world);

}  // namespace train_gpt
