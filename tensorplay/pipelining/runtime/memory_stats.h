// What a pipeline step held in memory, per stage and per rank: the measured peak of the bytes
// its actions allocated (activations, gradients) and the fixed bytes (parameters, optimizer).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tensorplay::optim {
class Optimizer;
}

namespace tensorplay::pipelining {

class PipelineStage;

/// One stage's bytes over the last step. Activation and gradient bytes are those allocated while
/// the stage ran an action (on any device), or received as its inputs and output gradients; the
/// peaks are since the step began.
struct StageMemoryStats {
  int stage = 0;
  int rank = 0;
  /// Highest activation bytes held during the step, above those held when it began (stashed
  /// microbatches, recomputed ones, workspaces, tensors being sent).
  int64_t peak_activation_bytes = 0;
  /// Highest activation and gradient bytes held together, above those held when it began.
  int64_t peak_step_bytes = 0;
  int64_t activation_bytes = 0;  ///< activation bytes held now (after the step)
  int64_t parameter_bytes = 0;   ///< the stage's parameters and buffers
  int64_t gradient_bytes = 0;    ///< its parameters' .grad tensors now
  int64_t optimizer_bytes = 0;   ///< the optimizer's state of its parameters (0 without one)
  /// A stage sharded with fully_shard: the bytes of its parameters while gathered (from its
  /// UNSHARD to its RESHARD) in the step; 0 for a stage not sharded. Its parameter, gradient and
  /// optimizer bytes above are this rank's shards.
  int64_t gathered_parameter_bytes = 0;
};

/// One rank's bytes over the last step (its stages together, this process's ranks only).
struct RankMemoryStats {
  int rank = 0;
  /// Highest activation bytes its stages held together during the step, above the start.
  int64_t peak_activation_bytes = 0;
  int64_t parameter_bytes = 0;
  int64_t gradient_bytes = 0;
  int64_t optimizer_bytes = 0;
  /// The most parameter bytes its sharded stages held gathered at once during the step (the
  /// gathered-parameter high-water mark; 0 without sharded stages).
  int64_t peak_gathered_parameter_bytes = 0;
  /// The measured peak: parameters and optimizer state, plus the highest activation and gradient
  /// bytes its stages held together at any moment of the step.
  int64_t peak_bytes = 0;
};

/// schedule.memory_stats(): the stages this process hosts and their ranks, by index.
struct MemoryStats {
  std::vector<StageMemoryStats> stages;
  std::vector<RankMemoryStats> ranks;
};

/// Gives `stages` (one rank's) a shared account of the rank as parent (the stage worker's
/// construction).
void link_rank_memory(const std::vector<PipelineStage*>& stages);
struct StepData;
/// The results of a finished step (the last stage's outputs and losses) stop counting against
/// the stage: they are the caller's now.
void hand_over_results(StepData& step);
/// Starts a step's peaks: every stage's account and its rank's.
void reset_memory_peaks(const std::vector<PipelineStage*>& stages);
/// Bytes the rank of `stages` holds now (activations and gradients charged to its stages).
int64_t rank_memory_bytes(const std::vector<PipelineStage*>& stages);

/// The figures of `stages` placed on ranks by `stage_to_rank` (stage index -> rank); with
/// `optimizer`, its state is counted against the stages holding the parameters.
MemoryStats collect_memory_stats(const std::vector<std::shared_ptr<PipelineStage>>& stages,
                                 const std::vector<int>& stage_to_rank,
                                 const optim::Optimizer* optimizer = nullptr);

}  // namespace tensorplay::pipelining
