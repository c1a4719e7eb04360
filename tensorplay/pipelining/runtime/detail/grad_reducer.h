// Data-parallel gradient averaging for a schedule's local stages (private to pipelining/runtime/):
// buckets of gradients all-reduced over the stage's dp group, each started once its gradients are
// final.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/pipelining/runtime/schedule_options.h"

namespace tensorplay::pipelining::detail {

/// Sums `flat` in place over the dp group; `call` numbers the call alike on every replica.
using FlatAllReduce = std::function<void(Tensor& flat, uint64_t call)>;

/// Averages the gradients of a schedule's local stages over their data-parallel replicas.
///
/// Parameters are grouped into buckets: per stage (later stages first, since their backward
/// ends first), per dtype and device, in reverse registration order, up to the bucket size.
/// When overlapping, the reducer learns from a step's first weight-gradient action (W, or a full
/// backward B) of each stage how many gradient accumulations each parameter gets per action
/// (post-accumulate hooks); in the stage's last action of the step a bucket is ready as soon as
/// each of its parameters has had that many, and the stage's runtime dw_builder runner, after
/// the last action, hands over whatever is left. One thread runs the all-reduces, in bucket
/// order on every replica, so replicas never wait on each other's later buckets. Tied parameters
/// are averaged after the schedule has summed their copies (finish_step). Every replica ends
/// with the same bits.
class GradReducer {
 public:
  GradReducer(std::vector<PipelineStage*> stages, int n_microbatches, int dp_size,
              DataParallelOptions options, FlatAllReduce all_reduce, std::string name);
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  /// Each bucket's element count and dtype, in order ("n:dtype,..."), for replicas to compare.
  std::string layout() const;
  /// Sums every parameter and buffer over the replicas after zeroing them on all but dp rank
  /// 0: every replica then holds rank 0's values (a broadcast through the all-reduce).
  void broadcast_from_first(bool is_first);
  /// Before step `step`: whether it averages (`sync`), and which tied parameters to average
  /// after their copies are summed (name -> local copies).
  void begin_step(uint64_t step, bool sync, std::map<std::string, std::vector<Tensor>> tied);
  /// After the step's backward work and the tied sums: hands over what is left, waits until
  /// every all-reduce is done or `deadline`, and throws PipelineError naming what failed.
  void finish_step(std::chrono::steady_clock::time_point deadline);
  /// After a failed step: drops queued buckets and waits (bounded) for the running one, which
  /// `cancel` ends (it cancels the reducer's transfers).
  void abandon_step(const std::function<void()>& cancel);
  DataParallelStats stats() const;
  /// A replica says its step `step` failed (`why`): that step's averaging fails at once with the
  /// reason (now, or when the step begins here), instead of waiting for the replica's buckets.
  /// Returns true when a step now running here is affected.
  bool peer_failed(uint64_t step, const std::string& why);

 private:
  struct Bucket;
  struct StageState;
  /// Stage `si`'s parameters (those not tied and not in `seen` yet) in buckets of at most
  /// bucket_cap_bytes of one dtype and device, in reverse registration order.
  std::unique_ptr<StageState> bucket_stage(size_t si, std::set<const TensorImpl*>& seen);
  /// Hooks every bucketed parameter's gradient accumulation and every stage's W actions.
  void attach_hooks();
  void on_accumulate(size_t stage, size_t slot);
  void on_action_done(size_t stage);
  void hand_over(size_t bucket);  // stage thread: the bucket's gradients are final
  void run();                     // the all-reduce thread
  void reduce_bucket(Bucket& b);
  void reduce_tied();
  uint64_t call_of(size_t job) const;

  std::vector<PipelineStage*> stages_;
  int n_microbatches_;
  int dp_size_;
  DataParallelOptions options_;
  FlatAllReduce all_reduce_;
  std::string name_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::unique_ptr<StageState>> stage_state_;
  std::vector<std::pair<Tensor, uint64_t>> hooks_;  // parameter, hook id
  uint64_t stride_ = 1;  // calls per step: the jobs, rounded up to a power of two

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::thread thread_;
  bool stop_ = false;
  // Per step (under mutex_): which buckets are handed over, the next to run, and the outcome.
  std::atomic<bool> active_{false};  // hooks act only during a syncing step
  uint64_t step_ = 0;
  std::vector<bool> ready_;
  size_t next_ = 0;
  size_t done_ = 0;
  size_t jobs_ = 0;  // buckets, plus one for the tied parameters when any
  bool abandon_ = false;
  bool running_ = false;  // the thread is in an all-reduce
  std::string error_;
  std::map<std::string, std::vector<Tensor>> tied_;
  std::map<uint64_t, std::string> peer_failures_;  // recent steps a replica reported failed
  DataParallelStats stats_;
  std::chrono::steady_clock::time_point backward_done_;
};

}  // namespace tensorplay::pipelining::detail
