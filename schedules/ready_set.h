// What has arrived and completed on one rank, so a policy can ask "is this action runnable?".
// Dense per-stage bit flags, allocated only for the stages the rank touches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedules/action.h"

namespace tensorplay::schedules {

/// Arrivals and completions of one rank for one training step.
///
/// Stage 0's inputs are the rank's own microbatches and the last stage's output gradient comes
/// from its own loss, so those count as present without a call. A completed F of stage s also
/// makes the input of (s+1, mb) present, and a completed I/B of s the gradient of (s-1, mb): when
/// the neighbour stage is on this rank that is the hand-over; otherwise it is never asked.
class ReadySet {
 public:
  /// For `num_stages` stages in the whole pipeline and `num_microbatches` per step.
  ReadySet(int num_stages, int num_microbatches);

  /// The forward input of (stage, microbatch) is present.
  void input_arrived(int stage, int microbatch);
  /// The output gradient of (stage, microbatch) is present.
  void grad_arrived(int stage, int microbatch);
  /// A compute action finished (OverlapFB completes both of its sub-actions).
  void completed(const Action& action);
  /// F: input present; I/B: F completed and gradient present; W: I completed;
  /// OverlapFB: both sub-actions ready. Communication actions are always ready.
  bool ready(const Action& action) const;
  /// Why `action` is not ready, e.g. "1B3: gradient not arrived" (for wait and timeout errors).
  std::string why_not_ready(const Action& action) const;
  /// Forgets everything: a new training step.
  void reset();

  // -- observers ---------------------------------------------------------------------------------

  /// True when the forward input of (stage, microbatch) is present.
  bool has_input(int stage, int microbatch) const;
  /// True when the output gradient of (stage, microbatch) is present.
  bool has_grad(int stage, int microbatch) const;
  /// True when a compute action of this kind completed for (stage, microbatch); a B counts as
  /// both I and W, an OverlapFB asks about its sub-actions.
  bool is_completed(const Action& action) const;
  /// Stages in the pipeline.
  int num_stages() const { return num_stages_; }
  /// Microbatches per step.
  int num_microbatches() const { return num_microbatches_; }

 private:
  enum Flag : uint8_t {
    kInput = 1,
    kGrad = 2,
    kForwardDone = 4,
    kInputGradDone = 8,
    kWeightGradDone = 16,
  };
  uint8_t flags(int stage, int microbatch) const;
  uint8_t& flags_for_update(int stage, int microbatch);
  void check(int stage, int microbatch) const;

  int num_stages_;
  int num_microbatches_;
  std::vector<int> slot_of_stage_;            // -1 until the stage is touched
  std::vector<std::vector<uint8_t>> slots_;   // per touched stage, one flag byte per microbatch
};

}  // namespace tensorplay::schedules
