// StageWorker: the logic of one stage actor, free of CAF. It holds one rank's stages, the ready
// set and the schedule policy, runs the actions the policy picks, and reports what it sent so the
// actor can notify the ranks that host the receiving stages.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/step_data.h"
#include "schedules/policy.h"
#include "schedules/ready_set.h"
#include "stages/pipeline_stage.h"
#include "transport/channel.h"

namespace tensorplay::pipelining {

/// A notification for the rank hosting `stage`: its input (Forward) or output gradient
/// (Backward) for `microbatch` has been posted on the channel.
struct Notification {
  uint64_t step = 0;
  int stage = 0;
  transport::Direction direction = transport::Direction::Forward;
  int microbatch = 0;
};

/// Observes the actions a worker runs (for the message log and timelines).
using ActionObserver = std::function<void(const char* event, const schedules::Action& action)>;

/// One rank's share of the pipeline.
class StageWorker {
 public:
  /// `stages` are this rank's stages (not owned); `training_policy` and `eval_policy` follow the
  /// schedule's order for this rank with and without backward actions.
  StageWorker(int rank, std::vector<PipelineStage*> stages, int num_stages, int num_microbatches,
              std::unique_ptr<schedules::SchedulePolicy> training_policy,
              std::unique_ptr<schedules::SchedulePolicy> eval_policy,
              std::shared_ptr<transport::Channel> channel,
              std::chrono::milliseconds transfer_timeout);

  int rank() const { return rank_; }
  /// True when this rank hosts `stage`.
  bool hosts(int stage) const;

  /// Starts a step.
  void begin_step(std::shared_ptr<StepData> step);
  /// A neighbour posted the input (or output gradient) of one of this rank's stages.
  void on_notification(const Notification& n);
  /// Runs actions until the policy waits or the step is done; `send` is called for every
  /// notification that goes to another rank. Exceptions from the stages propagate.
  void run_ready(const std::function<void(const Notification&)>& send,
                 const ActionObserver& observe = nullptr);
  /// The step's actions are all done.
  bool finished() const;
  /// What the worker waits for (for timeout messages).
  std::string describe_wait() const;
  /// Forgets the current step after an error: stashes cleared, policy reset.
  void abort_step();

 private:
  PipelineStage& stage(int index) const;
  void run(const schedules::Action& action, const std::function<void(const Notification&)>& send);
  void forward(int stage_index, int mb, const std::function<void(const Notification&)>& send);
  void backward(int stage_index, int mb, bool input_only,
                const std::function<void(const Notification&)>& send);
  schedules::SchedulePolicy& policy() const;

  int rank_;
  std::vector<PipelineStage*> stages_;
  std::vector<PipelineStage*> by_index_;  // stage index -> local stage or null
  int num_stages_;
  int num_microbatches_;
  std::unique_ptr<schedules::SchedulePolicy> training_policy_;
  std::unique_ptr<schedules::SchedulePolicy> eval_policy_;
  std::shared_ptr<transport::Channel> channel_;
  std::chrono::milliseconds transfer_timeout_;
  schedules::ReadySet ready_;
  std::shared_ptr<StepData> step_;
  std::vector<Notification> early_;  // notifications of a step this worker has not begun yet
};

}  // namespace tensorplay::pipelining
