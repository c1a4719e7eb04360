// StageWorker: the logic of one stage actor, free of CAF. It holds one rank's stages, the ready
// set and the schedule policy, runs the actions the policy picks, and reports what it sent so the
// actor can notify the ranks that host the receiving stages.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensorplay/pipelining/pipeline_stage.h"
#include "tensorplay/pipelining/runtime/step_data.h"
#include "tensorplay/schedules/policy.h"
#include "tensorplay/schedules/ready_set.h"
#include "tensorplay/transport/channel.h"
#include "tensorplay/wire/notification.h"
#include "tensorplay/wire/pipeline_tag.h"

namespace tensorplay::pipelining {

/// What StageWorker::check_notification found wrong with a notification.
struct NotificationCheck {
  /// What is wrong ("input 1:0 of step 3: microbatch out of range"); empty: accepted.
  std::string error;
  /// Set when the notification is well formed and well routed (a step in range, a stage hosted
  /// here, a microbatch in range, from the rank hosting the neighbouring stage) and only its
  /// tensors differ from what the stage was built for ("tensor 0 ('tanh_1') is float32[2,17],
  /// stage 1 expects float32[2,16]"): not noise but ranks that disagree, so the step it names
  /// cannot succeed.
  std::string mismatch;
  bool accepted() const { return error.empty(); }
};

/// What became of a notification handed to StageWorker::accept.
struct Acceptance {
  enum class Kind {
    Posted,    ///< its receive is posted: the `arrived` callback says when the tensors are here
    Arrived,   ///< the tensors are here already (call on_arrival now)
    Rejected,  ///< refused (`error`); `mismatch` set when only its tensors differ (see
               ///< NotificationCheck): the step it names cannot succeed
    Failed,    ///< its receive could not be posted (`error`)
  };
  Kind kind = Kind::Posted;
  std::string error;
  std::string mismatch;
  long long received_at = 0;  ///< when it came, on the message log's clock (0: the log is off)
};

/// Takes a notification the worker sends on (the stage actor's message to the stage's rank): it
/// is the callee's, to move into its message.
using NotificationSink = std::function<void(Notification&&)>;

/// Observes the actions a worker runs (for the message log and timelines).
using ActionObserver = std::function<void(const char* event, const schedules::Action& action)>;

/// One rank's share of the pipeline.
class StageWorker {
 public:
  /// `stages` are this rank's stages (not owned); `training_policy` and `eval_policy` follow the
  /// schedule's order for this rank with and without backward actions. `stage_to_peer` maps
  /// every stage to the channel peer (global rank) hosting it; `self_peer` is this process's.
  StageWorker(int rank, std::vector<PipelineStage*> stages, int num_stages, int n_microbatches,
              std::unique_ptr<schedules::SchedulePolicy> training_policy,
              std::unique_ptr<schedules::SchedulePolicy> eval_policy,
              std::shared_ptr<transport::Channel> channel,
              std::chrono::milliseconds transfer_timeout, std::vector<int> stage_to_peer = {},
              int self_peer = 0);

  int rank() const { return rank_; }
  /// True when this rank hosts `stage`.
  bool hosts(int stage) const;

  /// Starts a step.
  void begin_step(std::shared_ptr<StepData> step);
  /// Checks a notification from another process before anything is posted for it: a stage this
  /// rank hosts, a microbatch in range, the rank that hosts the neighbouring stage as source,
  /// and descriptors matching the stage's inputs (or output gradients) in count, dtype and
  /// shape (the batch dimension may differ) within the size limit. Returns what is wrong, and
  /// whether it is a mismatch of tensors in a well-routed notification. Reads only what
  /// construction fixed: safe from any thread.
  NotificationCheck check_notification(const Notification& n) const;
  /// The one entry point of an arriving notification, whatever brought it (a CAF message, a
  /// channel message): checked when `from_elsewhere` (another process sent it; a refusal is
  /// counted in the message log), timed, and its receive posted. Safe from any thread.
  Acceptance accept(const Notification& n, bool from_elsewhere,
                    std::function<void(const Notification&)> arrived);
  /// Writes the message log's `recv` line of an accepted notification, with the time accept
  /// saw it: callers write it once what it allowed is under way (the actor told, or the rank's
  /// ready work run), so that formatting it stays off the hop it ends. Nothing when refused.
  void log_received(const Notification& n, const Acceptance& a) const;
  /// A neighbour posted the input (or output gradient) of one of this rank's stages: posts the
  /// receive on the channel. Returns true when the tensors arrived at once (call on_arrival
  /// now); otherwise `arrived` is called later, from the channel's thread, and the caller's
  /// actor calls on_arrival when it hears of it.
  bool post_receive(const Notification& n, std::function<void(const Notification&)> arrived);
  /// The tensors of `n` are here: marks the input (or gradient) present for the policy. Throws
  /// TransferError when the receive failed.
  void on_arrival(const Notification& n);
  /// Records that the tensors of `n` will not come (`error` says why): on_arrival throws it.
  void fail_arrival(const Notification& n, std::string error);
  /// A notification whose tensors did not match (check_notification's `mismatch`), with the
  /// header of the notification (its tensors dropped).
  struct Rejection {
    Notification note;
    std::string mismatch;
  };
  /// Keeps a rejection for the actor (safe from any thread; at most 16 are kept until taken).
  /// Returns true when it is the first kept since the last take_rejections (tell the actor).
  bool keep_rejection(const Notification& n, std::string mismatch);
  /// The rejections kept since the last call, oldest first.
  std::vector<Rejection> take_rejections();
  /// Keys this worker's transfers with `stream` (the schedule's, where several share a channel)
  /// and, with `over_channel`, sends notifications as channel messages instead of through
  /// `send` (the receiving side decodes them with decode_notification).
  void set_stream(uint32_t stream, bool over_channel);
  /// Runs actions until the policy waits or the step is done; `send` is called for every
  /// notification that goes to another rank. Exceptions from the stages propagate. After each
  /// action, `should_yield` may end the run early (messages are waiting): returns true then,
  /// and the caller resumes later. When the policy waits for the output gradient of a
  /// recomputing stage's backward, that stage rebuilds the microbatch's activations meanwhile
  /// (PipelineStage::recompute_ahead), once per microbatch; a recomputing stage's F followed in
  /// the order by that microbatch's own backward keeps its activations instead
  /// (schedules::is_backward_of).
  bool run_ready(const NotificationSink& send, const ActionObserver& observe = nullptr,
                 const std::function<bool()>& should_yield = nullptr);
  /// The step's actions are all done.
  bool finished() const;
  /// True when the current step still needs a tensor from a stage that `stage_to_rank` places on
  /// rank `rank` (an input or gradient not yet here for an action not yet run).
  bool needs_rank(const std::vector<int>& stage_to_rank, int rank) const;
  /// What the worker waits for (for timeout messages). Call from the actor's thread.
  std::string describe_wait() const;
  /// The action this worker is computing now and for how long ("rank 1 is running F 1:3 for
  /// 1200 ms"), or empty between actions. Safe from any thread: a stage stuck in compute cannot
  /// answer messages, so status requests read this instead of waiting for it.
  std::string running() const;
  /// The last step this worker has aborted (abort_step), readable from any thread.
  uint64_t aborted_step() const { return aborted_step_.load(std::memory_order_acquire); }
  /// Forgets the current step after step `step` failed: stashes cleared, policy reset.
  void abort_step(uint64_t step);

 private:
  PipelineStage& stage(int index) const;
  /// How the tensors of a well-routed notification differ from what its stage expects ("tensor
  /// 0 is float32[2,17], stage 1 expects float32[2,16]"); empty when they match.
  std::string tensor_mismatch(const Notification& n) const;
  /// `in_pair`: a sub-action of an OVERLAP_F_B (its F never keeps its activations for a
  /// backward next: the rule holds for a plain F, as in the simulator).
  void run(const schedules::Action& action, const NotificationSink& send, bool in_pair = false);
  /// While the policy waits for its next action, the preparation that action allows: the
  /// recomputation of a backward whose output gradient has not arrived.
  void prepare_while_waiting();
  /// `keep_activations`: the rank's order runs this microbatch's backward next
  /// (PipelineStage::forward).
  void forward(int stage_index, int mb, const NotificationSink& send, bool keep_activations);
  void backward(int stage_index, int mb, bool input_only, const NotificationSink& send);
  schedules::SchedulePolicy& policy() const;
  /// Hands `tensors` to `stage` (this rank's or another's) and notifies.
  void deliver(const PipelineTag& tag, std::vector<Tensor> tensors, const NotificationSink& send);
  /// The channel key of a transfer of this worker's stream (pipeline_tag.h).
  transport::TransferKey key_of(const PipelineTag& tag) const;
  /// Takes the received tensors of `tag` out of the received-tensor table.
  std::vector<Tensor> take(const PipelineTag& tag);

  int rank_;
  std::vector<PipelineStage*> stages_;
  std::vector<PipelineStage*> by_index_;  // stage index -> local stage or null
  int num_stages_;
  int n_microbatches_;
  std::unique_ptr<schedules::SchedulePolicy> training_policy_;
  std::unique_ptr<schedules::SchedulePolicy> eval_policy_;
  std::shared_ptr<transport::Channel> channel_;
  std::chrono::milliseconds transfer_timeout_;
  schedules::ReadySet ready_;
  std::shared_ptr<StepData> step_;
  std::vector<Notification> early_;  // notifications of a step this worker has not begun yet
  std::vector<int> stage_to_peer_;
  int self_peer_;
  uint32_t stream_ = 0;
  bool notify_over_channel_ = false;
  struct Received {
    std::vector<Tensor> tensors;
    std::string error;
  };
  /// Tensors received, by transfer. Shared with the channel's callbacks (which run on its threads
  /// and may outlive the worker).
  struct ReceivedTensors {
    std::mutex mutex;
    std::unordered_map<PipelineTag, Received, PipelineTagHash> entries;
  };
  std::shared_ptr<ReceivedTensors> received_ = std::make_shared<ReceivedTensors>();
  std::mutex rejections_mutex_;
  std::vector<Rejection> rejections_;
  /// Marks `busy_` with an action for its lifetime (what running() reports).
  class BusyScope;
  /// The action being computed (running()), guarded by busy_mutex_.
  mutable std::mutex busy_mutex_;
  std::optional<schedules::Action> busy_;
  std::chrono::steady_clock::time_point busy_since_;
  std::atomic<uint64_t> aborted_step_{0};
};

}  // namespace tensorplay::pipelining
