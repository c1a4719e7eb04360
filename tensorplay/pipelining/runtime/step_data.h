// What one training or evaluation step hands to the stage workers of this process: the
// microbatches for stage 0, the targets for the last stage, the loss function, and the places
// where results land. Shared (read-mostly) between the driver and the workers.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tensorplay/core/tensor.h"
#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/schedules/action.h"

namespace tensorplay::pipelining {

/// A step's loss of the last stage's outputs: set from a LossFn (the one output; an error
/// naming the count when there are several) or from an OutputsLossFn (all of them).
class StepLoss {
 public:
  StepLoss() = default;
  StepLoss(std::nullptr_t) {}
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, StepLoss>>>
  StepLoss(F f) {
    if constexpr (std::is_constructible_v<bool, const F&>) {
      if (!static_cast<bool>(f)) return;  // an empty function: no loss
    }
    if constexpr (std::is_invocable_v<F&, const Tensor&, const Tensor&>) {
      fn_ = [one = std::move(f)](const std::vector<Tensor>& outputs, const Tensor& target) {
        if (outputs.size() != 1)
          throw std::invalid_argument(
              "the last stage produces " + std::to_string(outputs.size()) +
              " outputs, and the loss function takes one; give ScheduleOptions::outputs_loss_fn, "
              "which gets them all");
        return one(outputs[0], target);
      };
    } else {
      fn_ = OutputsLossFn(std::move(f));
    }
  }
  explicit operator bool() const { return static_cast<bool>(fn_); }
  /// The loss of one microbatch.
  Tensor operator()(const std::vector<Tensor>& outputs, const Tensor& target) const {
    return fn_(outputs, target);
  }

 private:
  OutputsLossFn fn_;
};

/// One step's inputs and results.
struct StepData {
  uint64_t step = 0;
  bool training = true;
  std::vector<std::vector<Tensor>> microbatch_inputs;  ///< [mb][input] for stage 0
  /// [mb] keyword inputs for stage 0's module (empty when none, or flattened into the inputs)
  std::vector<nn::TensorDict> microbatch_kwargs;
  std::vector<Tensor> targets;  ///< [mb] for the last stage (may be empty)
  StepLoss loss_fn;             ///< the loss of the last stage's outputs (null: none)
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

  /// Whether the last stage's outputs are kept for the caller (StepOptions::return_outputs);
  /// when not, each microbatch's output goes once its loss is computed.
  bool keep_outputs = true;

  // Results, written by the worker hosting the last stage.
  std::mutex results_mutex;
  std::vector<Tensor> losses;                ///< [mb], detached
  std::vector<std::vector<Tensor>> outputs;  ///< [mb][output], last stage's outputs, detached
};

}  // namespace tensorplay::pipelining
