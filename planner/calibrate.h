// Calibrating a profile against the runtime: one real run tells how much time the runtime adds
// to each compute action (messages, scheduling), which the profile's segment times lack.
#pragma once

#include <vector>

#include "planner/profile.h"
#include "stages/pipeline_stage.h"
#include "tensors/nn/module.h"
#include "tensors/tensor.h"

namespace tensorplay::pipelining {

/// What calibrate_profile runs.
struct CalibrationOptions {
  LossFn loss_fn;
  Tensor target;         ///< one microbatch's target
  int microbatches = 4;  ///< of the profile's size each
  int steps = 5;         ///< timed steps (the best counts), after one warm-up step
};

/// Runs `model` on the embedded runtime, two ranks under 1F1B (cut balanced on the profile,
/// `options.microbatches` copies of `example_microbatch` per step), and sets
/// profile.action_overhead to the per-action time that makes the simulator's pipeline step (no
/// optimizer step) equal the measured one (0 when the simulator is already slower). Returns the
/// measured step in seconds. The model's gradients are left zero; its parameters do not change.
double calibrate_profile(Profile& profile, nn::Module& model,
                         const std::vector<Tensor>& example_microbatch,
                         const CalibrationOptions& options);

}  // namespace tensorplay::pipelining
