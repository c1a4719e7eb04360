// The state behind PipelineSchedule (private to pipelining/runtime/), in named parts: what it was
// built from (the spec and its placement), the rank runtime (embedded or one process's rank), the
// step driver, and the step hooks (tied gradients, data-parallel averaging).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "tensorplay/pipelining/runtime/detail/data_parallel_hook.h"
#include "tensorplay/pipelining/runtime/detail/rank_runtime.h"
#include "tensorplay/pipelining/runtime/detail/schedule_spec.h"
#include "tensorplay/pipelining/runtime/detail/step_driver.h"
#include "tensorplay/pipelining/runtime/detail/tied_gradient_hook.h"
#include "tensorplay/pipelining/runtime/schedule.h"

namespace tensorplay::pipelining {

struct PipelineSchedule::Impl {
  detail::ScheduleSpec spec;
  /// The global ranks of the stages' group, by schedule rank (empty: the embedded runtime).
  std::vector<int> group_ranks;
  std::unique_ptr<detail::RankRuntime> ranks;
  std::unique_ptr<detail::StepDriver> driver;
  detail::StepHooks hooks;
  detail::DataParallelHook* data_parallel = nullptr;  ///< among hooks; null without "dp"
  /// One step at a time: a second caller fails at once instead of queueing behind the first.
  std::atomic<bool> stepping{false};
  bool sync_gradients = true;           ///< false under no_sync
  CustomFunction overlap_fb;            ///< register_custom_function(OverlapFB, ...)
  std::vector<PipelineStage*> claimed;  ///< stages this schedule owns (released at the end)

  ~Impl() {
    for (PipelineStage* s : claimed) s->release(this);
  }

  /// Whether the stages are all of the pipeline, or this process's share of a process group's;
  /// sets group_ranks.
  void find_group();
  /// The checks of this process's share: stages, counts, options, then the placement.
  void check_local();
  void check_stages();
  /// A parameter tensor two stages on different ranks share (their threads would race).
  void check_shared_parameters() const;
  /// The step's data for the ranks, checked (throws std::invalid_argument naming what to pass).
  std::shared_ptr<StepData> prepare(uint64_t step, const std::vector<Tensor>& inputs,
                                    const nn::TensorDict& kwargs, const StepOptions& step_options,
                                    bool training) const;
  StepOutput run_step(const std::vector<Tensor>& inputs, const nn::TensorDict& kwargs,
                      const StepOptions& step_options, bool training);
};

}  // namespace tensorplay::pipelining
