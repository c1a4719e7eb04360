// The step folders of layout-free checkpoints as their indexes describe them (which stages each
// covers, whether they are complete), and the argument checks saving and loading share.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensorplay/core/random.h"
#include "tensorplay/pipelining/checkpoints/checkpoint_index.h"
#include "tensorplay/pipelining/checkpoints/named_checkpoint_info.h"
#include "tensorplay/pipelining/pipeline_stage.h"

namespace tensorplay::pipelining {

/// One step folder's indexes.
struct NamedStep {
  std::string folder;
  /// The indexes that parsed, by their lowest stage, with their paths.
  std::vector<CheckpointIndex> indexes;
  std::vector<std::string> paths;
  /// Why an index there did not parse (truncated, damaged), one message each.
  std::vector<std::string> damaged;
  /// Every stage of the writer's pipeline covered once, by indexes that agree on the stage
  /// count, and nothing damaged.
  bool complete() const;
  /// Why not complete, in words.
  std::string why_incomplete() const;
  /// Step, samples, writer's stage count and layout (from the lowest stage's index).
  NamedCheckpointInfo info() const;
};

/// The step folders under `dir` holding at least one index file, by step (nothing is read).
std::map<int64_t, std::string> named_step_folders(const std::string& dir);

/// Reads and parses the indexes of one step folder.
NamedStep read_named_step(const std::string& folder);

/// The stage count of `stages`; throws CheckpointError for none, a null one, or stages of
/// pipelines of different stage counts.
int checked_stage_count(const std::vector<std::shared_ptr<PipelineStage>>& stages);

/// "default" (the default generator) followed by `extra`; throws CheckpointError for a null
/// generator, the default one listed, or a name given twice.
std::vector<std::pair<std::string, Generator*>> checked_generators(
    const std::vector<std::pair<std::string, Generator*>>& extra);

}  // namespace tensorplay::pipelining
