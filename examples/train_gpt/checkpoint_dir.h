// train_gpt's --checkpoint-dir: claimed before any work (writable, and an earlier run's
// checkpoints kept unless --overwrite), its step folders listed and named in messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "options.h"

namespace train_gpt {

/// Whether the run goes on from a checkpoint without --resume: when a launcher started the ranks
/// again after a failure (tp-launch --max-restarts, torchrun), or when the layout is left to the
/// world size (--pp auto, --dp auto) and there is one.
bool resumes_by_itself(const Options& o);

/// The steps of the checkpoint folders (step_NNNNNNNN, complete or not) under `dir`, increasing.
std::vector<int64_t> checkpoint_folder_steps(const std::string& dir);

/// "step 4", "steps 4, 8 and 12" (the last few) for messages naming the checkpoints a folder holds.
std::string steps_text(const std::vector<int64_t>& steps);

/// Before any work: --checkpoint-dir must be a folder this process can write, and a run that
/// starts over must not overwrite an earlier run's checkpoints unless --overwrite says so (rank 0
/// then deletes them, before the ranks meet to build the pipeline). Throws std::invalid_argument
/// naming the flag and what to do.
void claim_checkpoint_dir(const Options& o, int rank);

}  // namespace train_gpt
