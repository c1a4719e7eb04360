// StageWorker: runs the policy's actions on the local stages and posts results on the channel.
#include "actors/stage_worker.h"

#include <stdexcept>

#include "tensors/autograd/grad_mode.h"

namespace tensorplay::pipelining {

using schedules::Action;
using schedules::ActionKind;
using transport::Direction;
using transport::TransferTag;

StageWorker::StageWorker(int rank, std::vector<PipelineStage*> stages, int num_stages,
                         int num_microbatches,
                         std::unique_ptr<schedules::SchedulePolicy> training_policy,
                         std::unique_ptr<schedules::SchedulePolicy> eval_policy,
                         std::shared_ptr<transport::Channel> channel,
                         std::chrono::milliseconds transfer_timeout)
    : rank_(rank),
      stages_(std::move(stages)),
      by_index_(num_stages, nullptr),
      num_stages_(num_stages),
      num_microbatches_(num_microbatches),
      training_policy_(std::move(training_policy)),
      eval_policy_(std::move(eval_policy)),
      channel_(std::move(channel)),
      transfer_timeout_(transfer_timeout),
      ready_(num_stages, num_microbatches) {
  for (PipelineStage* s : stages_) by_index_.at(s->stage_index()) = s;
}

bool StageWorker::hosts(int stage) const {
  return stage >= 0 && stage < num_stages_ && by_index_[stage] != nullptr;
}

PipelineStage& StageWorker::stage(int index) const {
  if (!hosts(index))
    throw std::logic_error("rank " + std::to_string(rank_) + " was asked to run stage " +
                           std::to_string(index) + ", which it does not host");
  return *by_index_[index];
}

schedules::SchedulePolicy& StageWorker::policy() const {
  return step_ && !step_->training ? *eval_policy_ : *training_policy_;
}

void StageWorker::begin_step(std::shared_ptr<StepData> step) {
  step_ = std::move(step);
  ready_.reset();
  policy().reset();
  std::vector<Notification> early = std::move(early_);
  early_.clear();
  for (const Notification& n : early)
    if (n.step == step_->step)
      on_notification(n);
    else if (n.step > step_->step)
      early_.push_back(n);
}

void StageWorker::on_notification(const Notification& n) {
  // A neighbour may start a step before this worker has seen it begin: keep its notifications.
  if (!step_ || n.step > step_->step) {
    early_.push_back(n);
    return;
  }
  if (n.step < step_->step) return;  // from an aborted step
  if (n.direction == Direction::Forward)
    ready_.input_arrived(n.stage, n.microbatch);
  else
    ready_.grad_arrived(n.stage, n.microbatch);
}

bool StageWorker::finished() const { return step_ && policy().finished(); }

std::string StageWorker::describe_wait() const {
  if (!step_) return "rank " + std::to_string(rank_) + ": no step started";
  return "rank " + std::to_string(rank_) + ": " + policy().describe_wait(ready_);
}

void StageWorker::abort_step() {
  for (PipelineStage* s : stages_) s->clear();
  if (step_) policy().reset();
  ready_.reset();
  step_.reset();
}

void StageWorker::run_ready(const std::function<void(const Notification&)>& send,
                            const ActionObserver& observe) {
  if (!step_) return;
  schedules::SchedulePolicy& p = policy();
  while (!p.finished()) {
    std::optional<Action> action = p.next(ready_);
    if (!action) return;
    if (observe) observe("start", *action);
    run(*action, send);
    ready_.completed(*action);
    p.completed(*action);
    if (observe) observe("finish", *action);
  }
}

void StageWorker::run(const Action& action, const std::function<void(const Notification&)>& send) {
  switch (action.kind) {
    case ActionKind::Forward:
      forward(action.stage, action.microbatch, send);
      return;
    case ActionKind::FullBackward:
      backward(action.stage, action.microbatch, false, send);
      return;
    case ActionKind::BackwardInput:
      backward(action.stage, action.microbatch, true, send);
      return;
    case ActionKind::BackwardWeight:
      stage(action.stage).backward_weight(action.microbatch);
      return;
    case ActionKind::OverlapFB:
      // On one CPU thread (or one stream) the pair runs back to back; the schedule still gains
      // from the order it implies.
      for (const Action& sub : action.sub_actions) run(sub, send);
      return;
    default:
      throw std::logic_error("stage worker got communication action " + to_string(action) +
                             ": communication is implied by the compute order");
  }
}

void StageWorker::forward(int stage_index, int mb,
                          const std::function<void(const Notification&)>& send) {
  PipelineStage& s = stage(stage_index);
  std::vector<Tensor> inputs;
  if (s.is_first()) {
    inputs = step_->microbatch_inputs.at(mb);
  } else {
    inputs = channel_->receive(TransferTag{step_->step, stage_index, Direction::Forward, mb}, {},
                               s.device(), transfer_timeout_);
  }
  std::vector<Tensor> outputs;
  if (step_->training) {
    outputs = s.forward(mb, inputs);
  } else {
    NoGradGuard no_grad;
    outputs = s.forward(mb, inputs);
  }
  if (s.is_last()) {
    std::lock_guard lock(step_->results_mutex);
    if (step_->outputs.size() != static_cast<size_t>(num_microbatches_))
      step_->outputs.resize(num_microbatches_);
    step_->outputs[mb] = outputs.empty() ? Tensor() : outputs[0];
    if (step_->loss_fn && !step_->targets.empty()) {
      Tensor loss;
      if (step_->training) {
        loss = s.compute_loss(mb, step_->targets.at(mb), step_->loss_fn);
      } else {
        NoGradGuard no_grad;
        loss = step_->loss_fn(outputs.at(0), step_->targets.at(mb).to(s.device())).detach();
      }
      if (step_->losses.size() != static_cast<size_t>(num_microbatches_))
        step_->losses.resize(num_microbatches_);
      step_->losses[mb] = loss;
    }
    return;
  }
  channel_->send(TransferTag{step_->step, stage_index + 1, Direction::Forward, mb},
                 std::move(outputs));
  if (!hosts(stage_index + 1)) send({step_->step, stage_index + 1, Direction::Forward, mb});
}

void StageWorker::backward(int stage_index, int mb, bool input_only,
                           const std::function<void(const Notification&)>& send) {
  PipelineStage& s = stage(stage_index);
  std::vector<Tensor> output_grads;
  if (!s.is_last()) {
    output_grads = channel_->receive(TransferTag{step_->step, stage_index, Direction::Backward, mb},
                                     {}, s.device(), transfer_timeout_);
  } else if (!step_->loss_fn || step_->targets.empty()) {
    throw std::invalid_argument(
        "training step without a loss: pass a loss function to the schedule and a target to "
        "step()");
  }
  std::vector<Tensor> input_grads = input_only
                                        ? s.backward_input(mb, output_grads, step_->loss_scale)
                                        : s.backward(mb, output_grads, step_->loss_scale);
  if (s.is_first()) return;
  channel_->send(TransferTag{step_->step, stage_index - 1, Direction::Backward, mb},
                 std::move(input_grads));
  if (!hosts(stage_index - 1)) send({step_->step, stage_index - 1, Direction::Backward, mb});
}

}  // namespace tensorplay::pipelining
