// train_gpt --unsplit --tp N: checkpoints of the split model written as named checkpoints of the
// unsplit model (one stage holding it whole), so any layout resumes them: another tp degree, or
// a pipeline of any split.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tensorplay/distributed/process_group.h"
#include "tensorplay/nn/module.h"
#include "tensorplay/optim/adamw.h"
#include "tensorplay/pipelining/checkpoints/named_checkpoint.h"
#include "tensorplay/pipelining/pipeline_stage.h"

namespace train_gpt {

/// An unsplit mirror of a split model and its AdamW, through which the split model's weights and
/// optimizer state are gathered for saving and dealt out after loading.
class TensorParallelCheckpoints {
 public:
  /// `unsplit` is a model of the split one's configuration, kept whole (its weights are
  /// overwritten), traced on `rows` x `context` token ids; `adam` the split optimizer's options.
  TensorParallelCheckpoints(std::shared_ptr<tensorplay::nn::Module> unsplit,
                            const tensorplay::optim::AdamWOptions& adam, int64_t rows,
                            int64_t context);

  /// Every member of `tp` calls it: the weights and optimizer state gathered whole, member 0
  /// writing them under `dir` as step `step` (save_named_checkpoint of one stage).
  void save(const std::string& dir, const tensorplay::nn::Module& model,
            const tensorplay::optim::AdamW& opt, const tensorplay::distributed::ProcessGroup& tp,
            int64_t step, const tensorplay::pipelining::NamedCheckpointOptions& options);

  /// Every member calls it: reads the step (any layout's) whole into the mirror, then each
  /// member loads its share into `model` and `opt` (split over `tp` at any degree).
  tensorplay::pipelining::NamedCheckpointInfo load(
      const std::string& dir, tensorplay::nn::Module& model, tensorplay::optim::AdamW& opt,
      const tensorplay::distributed::ProcessGroup& tp, std::optional<int64_t> step,
      const tensorplay::pipelining::NamedCheckpointOptions& options);

 private:
  std::shared_ptr<tensorplay::nn::Module> model_;
  std::shared_ptr<tensorplay::pipelining::PipelineStage> stage_;
  std::unique_ptr<tensorplay::optim::AdamW> opt_;
};

}  // namespace train_gpt
