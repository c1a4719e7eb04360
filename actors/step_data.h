// What one training or evaluation step hands to the stage workers of this process: the
// microbatches for stage 0, the targets for the last stage, the loss function, and the places
// where results land. Shared (read-mostly) between the driver and the workers.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "stages/pipeline_stage.h"
#include "tensors/tensor.h"

namespace tensorplay::pipelining {

/// One step's inputs and results.
struct StepData {
  uint64_t step = 0;
  bool training = true;
  std::vector<std::vector<Tensor>> microbatch_inputs;  ///< [mb][input] for stage 0
  std::vector<Tensor> targets;                         ///< [mb] for the last stage (may be empty)
  LossFn loss_fn;
  float loss_scale = 1.0f;  ///< seed of each microbatch's loss gradient (1/n by default)

  // Results, written by the worker hosting the last stage.
  std::mutex results_mutex;
  std::vector<Tensor> losses;   ///< [mb], detached
  std::vector<Tensor> outputs;  ///< [mb], last stage's output, detached
};

}  // namespace tensorplay::pipelining
