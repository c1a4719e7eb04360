// train_gpt --unsplit --tp N: named checkpoints of the unsplit model from a split one.
#include "tensor_parallel_checkpoint.h"

#include <vector>

#include "tensorplay/distributed/tensor_parallel/full_state_dict.h"
#include "tensorplay/distributed/tensor_parallel/optimizer_state.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace tpar = tensorplay::distributed::tensor_parallel;

namespace train_gpt {

// The mirror is the unsplit model traced as a pipeline of one stage, so the checkpoint names
// its tensors as any pipeline of the model does (a tied weight once).
TensorParallelCheckpoints::TensorParallelCheckpoints(std::shared_ptr<tp::nn::Module> unsplit,
                                                     const tp::optim::AdamWOptions& adam,
                                                     int64_t rows, int64_t context)
    : model_(unsplit),
      stage_(std::make_shared<pp::PipelineStage>(
          pp::build_stage(pp::pipeline(unsplit, {tp::zeros({rows, context})}), 0, tp::cpu()))),
      opt_(std::make_unique<tp::optim::AdamW>(stage_->module().parameters(), adam)) {}

void TensorParallelCheckpoints::save(const std::string& dir, const tp::nn::Module& model,
                                     const tp::optim::AdamW& opt,
                                     const tp::distributed::ProcessGroup& tp, int64_t step,
                                     const pp::NamedCheckpointOptions& options) {
  const tp::StateDict weights = tpar::full_state_dict(model, tp);
  const tp::StateDict state = tpar::full_optimizer_state_dict(opt, tp);
  if (tp.rank() == 0) {
    stage_->module().load_state_dict(weights, /*strict=*/false);  // a tie's second name left out
    opt_->load_state_dict(state);
    pp::save_named_checkpoint(dir, {stage_}, *opt_, step, options);
  }
  tp.barrier();  // the step is on disk before any member goes on (and may stop)
}

pp::NamedCheckpointInfo TensorParallelCheckpoints::load(const std::string& dir,
                                                        tp::nn::Module& model,
                                                        tp::optim::AdamW& opt,
                                                        const tp::distributed::ProcessGroup& tp,
                                                        std::optional<int64_t> step,
                                                        const pp::NamedCheckpointOptions& options) {
  const pp::NamedCheckpointInfo info =
      pp::load_named_checkpoint(dir, {stage_}, *opt_, step, options);
  // Through the whole model, which names a tied weight under both of its names.
  model_->load_state_dict(stage_->module().state_dict(), /*strict=*/false);
  tpar::load_full_state_dict(model, model_->state_dict(), tp);
  tpar::load_full_optimizer_state_dict(opt, opt_->state_dict(), tp);
  return info;
}

}  // namespace train_gpt
