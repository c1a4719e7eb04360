// Measuring what one microbatch holds on a stage: its forward, backward (or I and W) run once on
// zeros under a private memory account, giving the memory model's bytes
// (tensorplay/schedules/memory_costs.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/schedules/memory_costs.h"

namespace tensorplay::pipelining {

/// One microbatch's bytes on one stage, as the stage is set up (its recompute policy included).
struct StageMemoryProfile {
  int stage = 0;
  /// Held from the end of its F to its backward (what F keeps; its received input too when it
  /// is a copy from another process).
  int64_t activation_bytes = 0;
  /// Held from the end of I to the end of W (what I keeps for W).
  int64_t weight_stash_bytes = 0;
  /// The most an action holds while it runs beyond what was held at its start (workspaces,
  /// rebuilt activations of a recomputing stage, gradients on their way).
  int64_t transient_bytes = 0;
  /// The same for each action alone: F (dropout masks and workspaces freed by its end), I (its
  /// workspace, the input gradients, rebuilt activations) and W. transient_bytes is the largest.
  int64_t forward_transient_bytes = 0;
  int64_t input_transient_bytes = 0;
  int64_t weight_transient_bytes = 0;
  /// The same for a full backward B (I and W at once), run on a second forward.
  int64_t full_backward_transient_bytes = 0;
  /// Held until the step ends: the last stage's outputs, which the step returns.
  int64_t retained_bytes = 0;
  /// The part of retained_bytes the stage's own graph holds until its backward anyway (a loss
  /// that saves its logits): held from F to the backward when the step returns no outputs.
  int64_t retained_kept_bytes = 0;
  /// Held until the next stage takes them: the outputs of a stage before the last.
  int64_t sent_bytes = 0;
  int64_t parameter_bytes = 0;  ///< parameters and buffers
  /// Segments the stage recomputes (its policy's modules; 0: it does not recompute). The figures
  /// above are then the recomputing ones (F keeps the segments' inputs, I and B rebuild them).
  int recomputed_segments = 0;
  /// A stage of one recomputed segment keeps its activations for a backward right after its
  /// forward (PipelineStage::forward's keep_activations): what such an F keeps. Zero on other
  /// stages, as the next two.
  int64_t kept_activation_bytes = 0;
  /// What such an F holds while it runs.
  int64_t kept_forward_transient_bytes = 0;
  /// What the I after such an F holds while it runs.
  int64_t kept_input_transient_bytes = 0;
  /// What the B after such an F holds while it runs.
  int64_t kept_full_backward_transient_bytes = 0;
  /// What the I after such an F keeps for W (a plain stage's stash), and what that W holds while
  /// it runs.
  int64_t kept_weight_stash_bytes = 0;
  int64_t kept_weight_transient_bytes = 0;
};

/// What the last stage needs to run its backward once.
struct MemoryProfileOptions {
  LossFn loss_fn;  ///< the schedule's loss
  Tensor target;   ///< one microbatch's target for it
  /// The stage's output gradients come from another process: the stage holds its own copies
  /// (within a process they stay charged to the stage that made them). Its inputs are its own
  /// either way: their maker keeps only their history.
  bool across_processes = false;
};

/// Runs one microbatch (microbatch index 0) through `stage` on zeros: F, then I and W, then F and
/// B again; on a stage of one recomputed segment, the same once more with F keeping its
/// activations. A recomputing stage is profiled with its policy: set it before profiling. The
/// stage's parameter gradients are restored afterwards and its stash left empty; random generators
/// its modules draw from (dropout) advance. Throws std::logic_error when the stage holds a
/// microbatch, std::invalid_argument when the last stage gets no loss or target.
StageMemoryProfile profile_stage_memory(PipelineStage& stage,
                                        const MemoryProfileOptions& options = {});

/// The memory model's costs from profiles of every stage (index = stage): activation, weight
/// stash and transient bytes (each action's own) as measured; fixed bytes the parameters, their
/// gradients and `optimizer_state_factor` times the parameters (AdamW: 2, SGD with momentum: 1).
/// A recomputing stage's profile gives `recompute` and its recomputing figures, and on a stage of
/// one segment the figures of an F that keeps its activations (`keep_before_backward`).
/// `outputs_returned`: whether the steps return their outputs (`StepOptions::return_outputs`).
/// When they do not, nothing is retained, and the outputs the last stage's graph holds anyway
/// (retained_kept_bytes) count as its activations until the backward.
schedules::MemoryCosts memory_costs_from(const std::vector<StageMemoryProfile>& profiles,
                                         double optimizer_state_factor = 0,
                                         bool outputs_returned = true);

}  // namespace tensorplay::pipelining
