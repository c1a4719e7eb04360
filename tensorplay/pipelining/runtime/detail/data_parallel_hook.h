// The data-parallel hook: averages gradients over the replicas of the stages' "dp" dimension,
// buckets while the backward runs and the rest when the step's ranks have finished.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorplay/pipelining/runtime/detail/grad_reducer.h"
#include "tensorplay/pipelining/runtime/detail/schedule_spec.h"
#include "tensorplay/pipelining/runtime/detail/step_hooks.h"

namespace tensorplay::pipelining::detail {

/// Averages gradients over the replicas of the stages' device mesh "dp" dimension: buckets go
/// while the backward runs, the rest (and the tied parameters, summed by then) when the step's
/// ranks have finished; a failed step is abandoned on every replica.
class DataParallelHook : public StepHook {
 public:
  /// Null when the stages' mesh has no "dp" dimension of more than one. `group_ranks`: the
  /// schedule's global ranks (empty in the embedded runtime). Collective over the replicas.
  static std::unique_ptr<DataParallelHook> make(const ScheduleSpec& spec,
                                                const std::vector<int>& group_ranks);
  ~DataParallelHook() override;

  void begin(uint64_t step) override;
  void finish(uint64_t step, Deadline deadline) override;
  void abandon(uint64_t step, const std::string& why) override;

  /// False under no_sync: steps accumulate locally.
  void set_sync(bool sync) { sync_ = sync; }
  bool sync() const { return sync_; }
  DataParallelStats stats() const { return reducer_->stats(); }

 private:
  DataParallelHook(const ScheduleSpec& spec, std::vector<int> dp_ranks);
  /// Routes the other replicas' failure notices for this hook's stream to the reducer.
  void listen_for_failures();

  const ScheduleSpec& spec_;
  std::shared_ptr<distributed::detail::GroupRuntime> runtime_;  ///< the job's
  std::vector<int> dp_ranks_;                                   ///< global ranks of the dp group
  uint32_t stream_ = 0;  ///< the reducer's traffic on the UCX channel
  bool sync_ = true;
  std::unique_ptr<GradReducer> reducer_;
  /// Unregisters the failure listener when reset (before reducer_ goes).
  std::shared_ptr<void> unlisten_;
};

/// For tests: called (with this replica's dp rank) when a DataParallelHook's setup with the other
/// replicas is done, at the end of its construction; null (the default) for none.
void set_data_parallel_setup_hook(void (*hook)(int dp_rank));

}  // namespace tensorplay::pipelining::detail
