// The model train_gpt trains, chosen by --model (a GPT-2 or a Llama) or read from a Hugging Face
// folder (--init-from), and written back out as one (--export): by the whole model in one process,
// by each pipeline stage its own tensors under tp-launch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "options.h"
#include "tensorplay/nn/module.h"
#include "tensorplay/pipelining/pipeline_stage.h"

namespace train_gpt {

/// The model and what the training loop needs to know of it.
struct ModelChoice {
  std::shared_ptr<tensorplay::nn::Module> module;
  std::string kind;          ///< "gpt2" or "llama"
  std::string block_prefix;  ///< the blocks' ModuleList: "blocks" (GPT) or "layers" (Llama)
  int64_t layers = 0;
  std::string description;  ///< "GPT, 4 blocks, width 128, 4 heads, context 64"
  /// With --init-from: the flags given that its folder overrode ("--layers 6 (the folder has 2),
  /// ..."); empty when none was.
  std::string overridden;
};

/// A new model of --model's kind and the sizes of the flags, for a vocabulary of `vocab`, or the
/// model of --init-from's folder (its sizes; its vocabulary must be `vocab` and its context at
/// least --context): its weights loaded, or with `by_stage` left for load_stage_parts. Parameters
/// in --dtype. Throws std::invalid_argument naming what does not fit.
ModelChoice make_model(const Options& o, int64_t vocab, bool by_stage = false);

/// Under tp-launch, each of this rank's `stages` reads its own tensors from --init-from's folder
/// (a model made by_stage).
void load_stage_parts(
    const Options& o, const ModelChoice& model,
    const std::vector<std::shared_ptr<tensorplay::pipelining::PipelineStage>>& stages);

/// Writes --export's folder: in one process from the whole model (which the stages of an
/// embedded pipeline share), under tp-launch from each rank's `stages` (replica 0's), each stage
/// its shard, the ranks meeting at a barrier before rank 0 writes the index and config.json.
void export_model(const Options& o, const ModelChoice& model,
                  const std::vector<std::shared_ptr<tensorplay::pipelining::PipelineStage>>& stages,
                  bool distributed, int dp_rank);

}  // namespace train_gpt
