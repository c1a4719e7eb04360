// The user-facing schedules: ScheduleGPipe, Schedule1F1B, ScheduleInterleaved1F1B,
// ScheduleLoopedBFS, ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble, ScheduleDualPipeV,
// ScheduleVHalf, ScheduleVMin.
// `step` chunks a batch into microbatches, runs them through the stage actors, returns when done.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/microbatch.h"
#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/pipelining/runtime/memory_stats.h"
#include "tensorplay/pipelining/runtime/schedule_options.h"
#include "tensorplay/schedules/action.h"
#include "tensorplay/schedules/policy_factory.h"
#include "tensorplay/schedules/schedule_kind.h"

namespace tensorplay::pipelining {

/// A schedule driving stages hosted in this process through stage actors. In the embedded
/// single-process default the process hosts every stage and each rank of the schedule is one
/// actor. Under a launcher (init_process_group) each process passes its own rank's stages: the
/// constructor meets the other ranks of the stages' process group (every rank constructs its
/// schedule), checks that they agree (schedule, microbatches, which rank built which stage), and
/// the stage actors then exchange descriptors over CAF and tensors over UCX or NCCL.
class PipelineSchedule {
 public:
  PipelineSchedule(std::vector<std::shared_ptr<PipelineStage>> stages, int n_microbatches,
                   LossFn loss_fn, schedules::ScheduleKind kind, ScheduleOptions options = {});
  virtual ~PipelineSchedule();
  PipelineSchedule(const PipelineSchedule&) = delete;
  PipelineSchedule& operator=(const PipelineSchedule&) = delete;

  /// One training step: forward and backward of every microbatch. Gradients accumulate into the
  /// stages' parameters; the copies of a tied parameter (build_stage) end the step holding the
  /// sum of their gradients, as the unsplit model's parameter would (across processes, through
  /// an all-reduce among the ranks holding a copy). Returns the last stage's output for the
  /// whole batch. Across processes (PyTorch's rule) the rank hosting stage 0 passes the inputs,
  /// the rank hosting the last stage the target and gets the output and losses, and every other
  /// rank calls `step({})` and gets an undefined tensor.
  Tensor step(const std::vector<Tensor>& inputs, const StepOptions& options = {});
  /// PyTorch's `step(*args, target=, losses=, return_outputs=, **kwargs)`: positional inputs
  /// split by args_chunk_spec, keyword inputs (those pipeline() traced with `mb_kwargs`, by
  /// name) split by kwargs_chunk_spec, and every output of the last stage returned. With no
  /// keyword inputs, spell the empty dict (`step(args, nn::TensorDict{}, ...)`): `{}` would also
  /// read as StepOptions.
  StepOutput step(const std::vector<Tensor>& args, const nn::TensorDict& kwargs,
                  const StepOptions& options = {});
  /// Forward only (no gradients); losses are computed when a target is given.
  Tensor eval(const std::vector<Tensor>& inputs, const StepOptions& options = {});
  /// Forward only, with keyword inputs and every output (as step(args, kwargs, options)).
  StepOutput eval(const std::vector<Tensor>& args, const nn::TensorDict& kwargs,
                  const StepOptions& options = {});

  /// PyTorch's register_custom_function: `function` runs every action of `kind` in place of the
  /// schedule's own handling. Only OVERLAP_F_B is supported (e.g. to interleave its forward and
  /// backward on two streams); the function runs both sub-actions through the context, once
  /// each, or the step fails naming the action. Throws std::invalid_argument for other kinds.
  void register_custom_function(schedules::ActionKind kind, CustomFunction function);

  /// PyTorch DDP's `no_sync()`: while the returned guard lives, steps accumulate gradients
  /// locally without averaging them over the "dp" replicas; the first step after it averages
  /// everything accumulated (so k steps under no_sync and one after equal one step over the
  /// k+1 batches). Does nothing without a "dp" dimension.
  class NoSync {
   public:
    explicit NoSync(PipelineSchedule& schedule);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    PipelineSchedule& schedule_;
    bool before_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }
  /// FSDP2's spelling of the same switch: false keeps the next steps' gradients local.
  void set_requires_gradient_sync(bool sync);
  bool requires_gradient_sync() const;
  /// What the last training step's data-parallel averaging did.
  DataParallelStats data_parallel_stats() const;
  /// What the last step held in memory, for the stages this process hosts and their ranks
  /// (tensorplay/pipelining/runtime/memory_stats.h); with `optimizer`, its state counts against the
  /// stages it updates.
  MemoryStats memory_stats(const optim::Optimizer* optimizer = nullptr) const;

  /// Each rank's compute actions, as generated (or as given in ScheduleOptions::order).
  const schedules::PipelineOrder& order() const;
  schedules::ScheduleKind kind() const;
  int n_microbatches() const;
  int num_ranks() const;
  /// True when the stages' other ranks run in other processes.
  bool is_distributed() const;
  /// The stream that tags this schedule's traffic on the channel it shares with other schedules
  /// across processes (0 in the embedded runtime); for diagnostics and protocol tests.
  uint32_t transport_stream() const;
  /// The stages this process hosts, by stage index.
  const std::vector<std::shared_ptr<PipelineStage>>& stages() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The base of schedules that run one stage per rank (GPipe, 1F1B). Under a launcher each
/// process passes its own stage (`build_stage(pipe, rank, device, group)`); in the embedded
/// single-process default it passes every stage.
class PipelineScheduleSingle : public PipelineSchedule {
 public:
  PipelineScheduleSingle(std::vector<std::shared_ptr<PipelineStage>> stages, int n_microbatches,
                         LossFn loss_fn, schedules::ScheduleKind kind,
                         ScheduleOptions options = {});
  /// This process's one stage; the caller keeps it alive while the schedule lives.
  PipelineScheduleSingle(PipelineStage& stage, int n_microbatches, LossFn loss_fn,
                         schedules::ScheduleKind kind, ScheduleOptions options = {});
};

/// The base of schedules that run several stages per rank (interleaved, looped, V). Under a
/// launcher each process passes its rank's stages (stages_of_rank); in the embedded default,
/// every stage.
class PipelineScheduleMulti : public PipelineSchedule {
 public:
  PipelineScheduleMulti(std::vector<std::shared_ptr<PipelineStage>> stages, int n_microbatches,
                        LossFn loss_fn, schedules::ScheduleKind kind, ScheduleOptions options = {});
};

/// The stage indices rank `rank` hosts when `num_stages` stages run under `kind` with
/// `stages_per_rank` stages per rank (0: the schedule's default), e.g. {r, 2p-1-r} for ZBV.
std::vector<int> stages_of_rank(schedules::ScheduleKind kind, int rank, int num_stages,
                                int stages_per_rank = 0);

#define TENSORPLAY_DECLARE_SCHEDULE_SINGLE(Name, Kind)                                  \
  /** Runs the Kind order (see tensorplay/schedules/generators.h). */                   \
  class Name : public PipelineScheduleSingle {                                          \
   public:                                                                              \
    Name(std::vector<std::shared_ptr<PipelineStage>> stages, int n_microbatches,        \
         LossFn loss_fn = nullptr, ScheduleOptions options = {})                        \
        : PipelineScheduleSingle(std::move(stages), n_microbatches, std::move(loss_fn), \
                                 schedules::ScheduleKind::Kind, std::move(options)) {}  \
    Name(PipelineStage& stage, int n_microbatches, LossFn loss_fn = nullptr,            \
         ScheduleOptions options = {})                                                  \
        : PipelineScheduleSingle(stage, n_microbatches, std::move(loss_fn),             \
                                 schedules::ScheduleKind::Kind, std::move(options)) {}  \
  };

#define TENSORPLAY_DECLARE_SCHEDULE_MULTI(Name, Kind)                                  \
  /** Runs the Kind order (see tensorplay/schedules/generators.h). */                  \
  class Name : public PipelineScheduleMulti {                                          \
   public:                                                                             \
    Name(std::vector<std::shared_ptr<PipelineStage>> stages, int n_microbatches,       \
         LossFn loss_fn = nullptr, ScheduleOptions options = {})                       \
        : PipelineScheduleMulti(std::move(stages), n_microbatches, std::move(loss_fn), \
                                schedules::ScheduleKind::Kind, std::move(options)) {}  \
  };

/// Runs every forward, then every backward.
TENSORPLAY_DECLARE_SCHEDULE_SINGLE(ScheduleGPipe, GPipe)
/// One forward, one backward after a warm-up of p - rank forwards.
TENSORPLAY_DECLARE_SCHEDULE_SINGLE(Schedule1F1B, OneFOneB)
/// 1F1B over several stages per rank (loop placement).
TENSORPLAY_DECLARE_SCHEDULE_MULTI(ScheduleInterleaved1F1B, Interleaved1F1B)
/// Breadth-first over the local stages (loop placement).
TENSORPLAY_DECLARE_SCHEDULE_MULTI(ScheduleLoopedBFS, LoopedBFS)
/// Zero bubble with split backward (I and W), loop placement.
TENSORPLAY_DECLARE_SCHEDULE_MULTI(ScheduleInterleavedZeroBubble, InterleavedZeroBubble)
/// Zero bubble in V placement (rank r holds stages r and 2p-1-r).
TENSORPLAY_DECLARE_SCHEDULE_MULTI(ScheduleZBVZeroBubble, ZBVZeroBubble)
/// DualPipe's V variant, with overlapped forward/backward pairs.
TENSORPLAY_DECLARE_SCHEDULE_MULTI(ScheduleDualPipeV, DualPipeV)
/// V placement holding about half of 1F1B's activations (Qi et al., controllable memory).
TENSORPLAY_DECLARE_SCHEDULE_MULTI(ScheduleVHalf, VHalf)
/// V placement holding about a third of 1F1B's activations, for a larger bubble.
TENSORPLAY_DECLARE_SCHEDULE_MULTI(ScheduleVMin, VMin)

#undef TENSORPLAY_DECLARE_SCHEDULE_SINGLE
#undef TENSORPLAY_DECLARE_SCHEDULE_MULTI

}  // namespace tensorplay::pipelining
