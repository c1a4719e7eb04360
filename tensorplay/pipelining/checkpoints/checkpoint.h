// Checkpoints of a pipeline: each stage's parameters, its share of the optimizer state, the step
// and the random generator states, one file per stage, so that a run can stop and resume exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tensorplay/core/random.h"
#include "tensorplay/optim/optimizer.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_error.h"
#include "tensorplay/pipelining/pipeline_stage.h"

namespace tensorplay::pipelining {

/// What a checkpoint holds besides the stages and the optimizer.
struct CheckpointOptions {
  /// Generators saved and restored with the checkpoint, by name (a data sampler's generator, a
  /// stage's dropout generator). The process-wide default generator is always saved as
  /// "default"; do not list it here.
  std::vector<std::pair<std::string, Generator*>> generators;
};

/// Layout on disk, under `dir`:
///
///   dir/step_00000120/stage_0.tpsd   the stage's tensors (tensorplay/core/serialize.h format):
///                                    "model.<name>" its state_dict, "optimizer.options.<x>"
///                                    and "optimizer.state.<parameter name>.<x>" its parameters'
///                                    optimizer state, "checkpoint.*" the step, stage index and
///                                    stage count, "rng.<name>" the generator states
///   dir/step_00000120/stage_0.done   completion marker: the file's size and FNV-1a 64 checksum
///
/// Every file is written to a temporary name ("<file>.tmp.<host>.<pid>"), flushed to disk (fsync),
/// renamed, and the folder flushed, so a crash leaves either the old state or the new file, never
/// a part. A write that fails removes its temporary file; the temporary files of a writer that
/// died (killed mid-write) are removed by the next save_checkpoint or load_checkpoint under `dir`
/// when their writer is a process of this host that no longer exists. The marker is
/// written after its stage file. A step is complete when all `num_stages` markers are there, so
/// processes that each save only their own stages into a shared folder need none of the others'
/// files; a step some rank has not finished is ignored by load_checkpoint.
///
/// Call it after the optimizer step of `step` (and before the next schedule step), on every
/// process, with the stages that process hosts and the optimizer over their parameters (every
/// parameter of `optimizer` must belong to one of `stages`). Throws CheckpointError when a file
/// cannot be written, naming it (and what to do when the disk or the file-size limit is full).
/// Stages built on a device mesh with a "dp" dimension are written by their first replica only (dp
/// rank 0; the others return at once) and loaded by every replica: a replica that loads right after
/// a save waits for the writer first (a barrier).
void save_checkpoint(const std::string& dir,
                     const std::vector<std::shared_ptr<PipelineStage>>& stages,
                     const optim::Optimizer& optimizer, int64_t step,
                     const CheckpointOptions& options = {});

/// Restores `stages` (parameters and buffers, in place), `optimizer` (hyper-parameters and
/// state) and the generators (the default one and those named in `options`) from the newest
/// complete step under `dir`, or from `step` when given, and returns that step: the run continues
/// with step + 1. Each process passes the same stages and optimizer layout it saved with. Throws
/// CheckpointError when there is no complete step (naming the steps saved by another stage count,
/// and that count, and the steps that are incomplete), when `step` is not complete, when a stage
/// file is truncated or its checksum differs from its marker (a damaged file: pass an earlier
/// step), or when its tensors do not fit the stages (another model or split).
int64_t load_checkpoint(const std::string& dir,
                        const std::vector<std::shared_ptr<PipelineStage>>& stages,
                        optim::Optimizer& optimizer, std::optional<int64_t> step = std::nullopt,
                        const CheckpointOptions& options = {});

/// The complete steps under `dir` for a pipeline of `num_stages` stages (every marker there,
/// written by a pipeline of that many stages), oldest first (empty when `dir` does not exist).
std::vector<int64_t> complete_checkpoint_steps(const std::string& dir, int num_stages);

/// The newest complete step under `dir`, if any.
std::optional<int64_t> latest_checkpoint_step(const std::string& dir, int num_stages);

}  // namespace tensorplay::pipelining
