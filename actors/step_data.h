// What one training or evaluation step hands to the stage workers of this process: the
// microbatches for stage 0, the targets for the last stage, the loss function, and the places
// where results land. Shared (read-mostly) between the driver and the workers.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "schedules/action.h"
#include "stages/pipeline_stage.h"
#include "tensors/tensor.h"

namespace tensorplay::pipelining {

/// One step's inputs and results.
struct StepData {
  uint64_t step = 0;
  bool training = true;
  std::vector<std::vector<Tensor>> microbatch_inputs;  ///< [mb][input] for stage 0
  /// [mb] keyword inputs for stage 0's module (empty when none, or flattened into the inputs)
  std::vector<nn::TensorDict> microbatch_kwargs;
  std::vector<Tensor> targets;  ///< [mb] for the last stage (may be empty)
  OutputsLossFn loss_fn;        ///< from every output of the last stage (a LossFn wrapped)
  float loss_scale = 1.0f;      ///< seed of each microbatch's loss gradient (1/n by default)
  /// [mb] seeds when they differ (uneven microbatches weighted by size); empty: loss_scale.
  std::vector<float> loss_scales;

  /// The seed of microbatch `mb`'s loss gradient.
  float loss_scale_of(int mb) const {
    return mb >= 0 && mb < static_cast<int>(loss_scales.size()) ? loss_scales[mb] : loss_scale;
  }
  /// The keyword inputs of `stage`'s microbatch `mb`: stage 0's, none for any other stage.
  const nn::TensorDict& kwargs_of(int stage, int mb) const {
    static const nn::TensorDict kNone;
    return stage == 0 && mb >= 0 && mb < static_cast<int>(microbatch_kwargs.size())
               ? microbatch_kwargs[mb]
               : kNone;
  }

  /// Runs an OVERLAP_F_B action in place of its sub-actions back to back (when set): `rank` runs
  /// it, and `run_sub` runs one sub-action as the schedule would.
  std::function<void(const schedules::Action& action, int rank,
                     const std::function<void(const schedules::Action&)>& run_sub)>
      overlap_fb;

  // Results, written by the worker hosting the last stage.
  std::mutex results_mutex;
  std::vector<Tensor> losses;                ///< [mb], detached
  std::vector<std::vector<Tensor>> outputs;  ///< [mb][output], last stage's outputs, detached
};

}  // namespace tensorplay::pipelining
