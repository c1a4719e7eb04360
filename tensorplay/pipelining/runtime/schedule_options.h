// What a schedule is built and stepped with: ScheduleOptions, StepOptions, data-parallel options
// and figures, StepOutput, custom functions, and PipelineError (a step that failed somewhere).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorplay/pipelining/microbatch.h"
#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/schedules/action.h"
#include "tensorplay/schedules/policy_factory.h"

namespace tensorplay::pipelining {

/// A step failed on some rank (the message names the rank and the cause) or timed out.
class PipelineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Data-parallel gradient averaging, for stages built on a device mesh with a "dp" dimension
/// (build_stage(pipe, s, device, mesh)): each stage is replicated over its dp group, every replica
/// trains on its own share of the batch, and the replicas' gradients are averaged every step.
struct DataParallelOptions {
  /// Bytes per gradient bucket (PyTorch DDP's bucket_cap_mb, 25 MiB). Buckets hold one stage's
  /// parameters of one dtype, in reverse registration order (the order backward finishes them).
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  /// Start a bucket's all-reduce as soon as the weight-gradient work that produces it is done
  /// (through the stage's dw_builder and gradient hooks), so it overlaps the backward work still
  /// to come; false: all-reduce every bucket after the step's backward (for comparison).
  bool overlap = true;
  /// At construction, give every replica dp rank 0's parameters and buffers (as DDP does).
  bool broadcast_parameters = true;
  // After an averaged step each parameter's .grad is a view into its bucket (DDP's
  // gradient_as_bucket_view): zero_grad drops it, later accumulations add into it, and the next
  // averaged step overwrites it, so clone a step's gradient to keep it past the next step.
};

/// What the last step's data-parallel gradient averaging did (empty without a "dp" dimension).
struct DataParallelStats {
  int buckets = 0;  ///< all-reduces run (the tied parameters' counts as one)
  /// Buckets handed over to the all-reduce while the step's backward work was still running.
  int buckets_overlapped = 0;
  int64_t bytes = 0;         ///< gradient bytes averaged
  double all_reduce_ms = 0;  ///< time the all-reduces took, summed
  /// Time the step spent waiting for them after its own backward work was done: what the
  /// overlap did not hide.
  double exposed_ms = 0;
  bool synced = false;  ///< false for a step under no_sync
};

/// Options shared by every schedule.
struct ScheduleOptions {
  /// How each positional input is split into microbatches: TensorChunkSpec(dim) or Replicate
  /// (dim 0 for every input when empty). A size that does not divide gives a smaller last
  /// microbatch, as torch.tensor_split.
  std::vector<ChunkSpec> args_chunk_spec;
  /// Seed each microbatch's loss gradient with 1/n_microbatches, so a step's gradients are the
  /// mean over microbatches (as PyTorch). The scaling is applied per step to the loss, never to
  /// accumulated gradients, so accumulating over several steps without zero_grad adds them up.
  /// Uneven microbatches are weighted by their share of the target's rows instead, so the
  /// gradients still equal those of the unsplit batch's mean loss.
  bool scale_grads = true;
  /// Longest a step may take before it fails with an error naming what each rank waits for.
  std::chrono::milliseconds step_timeout = std::chrono::minutes(5);
  /// Stages each rank hosts for the multi-stage schedules (0: the schedule's default, 2).
  int stages_per_rank = 0;
  /// Longest one tensor transfer may take.
  std::chrono::milliseconds transfer_timeout = std::chrono::minutes(2);
  /// How each keyword input of step(args, kwargs, ...) is split (by name; dim 0 when absent).
  std::map<std::string, ChunkSpec> kwargs_chunk_spec;
  /// How the target is split into the microbatches' targets (dim 0 by default).
  ChunkSpec target_chunk_spec = TensorChunkSpec{0};
  /// How each output of the last stage is merged over microbatches: TensorChunkSpec(dim),
  /// Replicate (the first microbatch's), a Reducer, or KeepMicrobatches (StepOutput's
  /// microbatch_outputs only). Empty: every output concatenated along dim 0 (a scalar per
  /// microbatch becomes one row each).
  std::vector<MergeSpec> output_merge_spec;
  /// Run this order instead of the schedule's generated one: PyTorch's `_load_csv`, e.g.
  /// `schedules::load_csv("order.csv")` as `tp-sim --csv` writes it (SEND/RECV actions are
  /// dropped: communication follows from the compute order). One row per rank, stages on the
  /// ranks where the schedule places them. Checked when the schedule is built: an order that
  /// misses or repeats an action, or would deadlock, throws schedules::ScheduleError with the
  /// validator's step-by-rank table, before any step runs.
  schedules::PipelineOrder order;
  /// A loss from every output of the last stage, used instead of the schedule's loss function
  /// (which takes the one output): what PyTorch's loss_fn gets from a multi-output stage.
  OutputsLossFn outputs_loss_fn;
  /// Builds each rank's policy (null: follow the order).
  /// `schedules::dynamic_policies({.max_stashed_activations = 2})` runs any ready action under
  /// an activation cap; your own factory may return any SchedulePolicy. Evaluation (eval) still
  /// follows the order's forwards.
  schedules::PolicyFactory policy;
  /// Data-parallel gradient averaging over the stages' mesh "dp" dimension (ignored without one).
  DataParallelOptions data_parallel;
};

/// What a step gets besides its inputs.
struct StepOptions {
  /// Target of the whole batch (split like the inputs); needed for training.
  Tensor target;
  /// When set, receives each microbatch's loss (unscaled).
  std::vector<Tensor>* losses = nullptr;
  /// Return the last stage's outputs (PyTorch's return_outputs); false skips merging them.
  bool return_outputs = true;
};

/// What step(args, kwargs, options) returns on the rank hosting the last stage (empty elsewhere,
/// or when return_outputs is false).
struct StepOutput {
  /// Every output of the last stage, merged over microbatches by output_merge_spec (undefined
  /// for an output kept per microbatch).
  std::vector<Tensor> outputs;
  /// The same outputs per microbatch: microbatch_outputs[mb][i].
  std::vector<std::vector<Tensor>> microbatch_outputs;
};

/// What a custom function (register_custom_function) gets besides its action.
struct CustomFunctionContext {
  int rank = 0;  ///< the schedule rank running the action
  /// Runs one of the action's sub-actions (its forward or its backward) as the schedule would;
  /// each must run exactly once.
  std::function<void(const schedules::Action&)> run;
};
/// Runs a whole action of the registered kind on the rank's thread.
using CustomFunction =
    std::function<void(const schedules::Action& action, const CustomFunctionContext& context)>;

}  // namespace tensorplay::pipelining
