// StageWorker: runs the policy's actions on the local stages and posts results on the channel.
#include "tensorplay/pipelining/runtime/stage_worker.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <utility>

#include "tensorplay/base/compute_activity.h"
#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/tensor_memory.h"
#include "tensorplay/observe/message_log.h"
#include "tensorplay/pipelining/pipe_digest.h"
#include "tensorplay/pipelining/runtime/detail/stage_sharding.h"
#include "tensorplay/pipelining/runtime/memory_stats.h"
#include "tensorplay/wire/protocol.h"

namespace tensorplay::pipelining {

using schedules::Action;
using schedules::ActionKind;

StageWorker::StageWorker(int rank, std::vector<PipelineStage*> stages, int num_stages,
                         int n_microbatches,
                         std::unique_ptr<schedules::SchedulePolicy> training_policy,
                         std::unique_ptr<schedules::SchedulePolicy> eval_policy,
                         std::shared_ptr<transport::Channel> channel,
                         std::chrono::milliseconds transfer_timeout, std::vector<int> stage_to_peer,
                         int self_peer)
    : rank_(rank),
      stages_(std::move(stages)),
      by_index_(num_stages, nullptr),
      num_stages_(num_stages),
      n_microbatches_(n_microbatches),
      training_policy_(std::move(training_policy)),
      eval_policy_(std::move(eval_policy)),
      channel_(std::move(channel)),
      transfer_timeout_(transfer_timeout),
      ready_(num_stages, n_microbatches),
      stage_to_peer_(std::move(stage_to_peer)),
      self_peer_(self_peer) {
  for (PipelineStage* s : stages_) by_index_.at(s->stage_index()) = s;
  if (stage_to_peer_.empty()) stage_to_peer_.assign(num_stages, self_peer_);
  link_rank_memory(stages_);
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
  if (step_) hand_over_results(*step_);  // the last step's outputs no longer count here
  step_ = std::move(step);
  reset_memory_peaks(stages_);
  ready_.reset();
  policy().reset();
  std::vector<Notification> early = std::move(early_);
  early_.clear();
  for (const Notification& n : early)
    if (n.step == step_->step)
      on_arrival(n);
    else if (n.step > step_->step)
      early_.push_back(n);
}

NotificationCheck StageWorker::check_notification(const Notification& n) const {
  constexpr uint64_t kMaxStep = 1ULL << 40;
  const std::string what = describe(n) + " of step " + std::to_string(n.step);
  if (n.step == 0 || n.step > kMaxStep) return {what + ": step out of range", {}};
  if (n.stage < 0 || n.stage >= num_stages_ || !hosts(n.stage))
    return {what + ": stage " + std::to_string(n.stage) + " is not hosted by rank " +
                std::to_string(rank_),
            {}};
  if (n.microbatch < 0 || n.microbatch >= n_microbatches_)
    return {what + ": microbatch out of range (the schedule has " +
                std::to_string(n_microbatches_) + ")",
            {}};
  const bool forward = n.direction == Direction::Forward;
  const int from_stage = forward ? n.stage - 1 : n.stage + 1;
  if (from_stage < 0 || from_stage >= num_stages_)
    return {what + ": stage " + std::to_string(n.stage) + " gets no " +
                (forward ? "input" : "gradient") + " from another stage",
            {}};
  if (!stage_to_peer_.empty() && n.source != stage_to_peer_.at(from_stage))
    return {what + ": sent by rank " + std::to_string(n.source) + ", but stage " +
                std::to_string(from_stage) + " runs on rank " +
                std::to_string(stage_to_peer_.at(from_stage)),
            {}};
  std::string mismatch = tensor_mismatch(n);
  if (mismatch.empty()) return {};
  return {what + ": " + mismatch, mismatch};
}

std::string StageWorker::tensor_mismatch(const Notification& n) const {
  constexpr uint64_t kMaxBytes = 1ULL << 36;  // 64 GiB: far above any one microbatch's tensors
  const PipelineStage& s = stage(n.stage);
  const bool forward = n.direction == Direction::Forward;
  const std::vector<TensorMeta>& meta = forward ? s.input_meta() : s.output_meta();
  const std::string expects = "stage " + std::to_string(n.stage) + " expects ";
  const std::string kind = forward ? "" : "gradients of ";
  if (n.tensors.size() != meta.size())
    return std::to_string(n.tensors.size()) + " tensors, " + expects + kind +
           std::to_string(meta.size());
  for (size_t i = 0; i < meta.size(); ++i) {
    const transport::TensorDescriptor& d = n.tensors[i];
    const std::string name =
        forward && i < s.input_names().size() ? " ('" + s.input_names()[i] + "')" : "";
    const std::string which = "tensor " + std::to_string(i) + name;
    if (!d.defined) {
      if (forward) return which + " is absent, " + expects + compact_string(meta[i]);
      continue;  // an input that needs no gradient
    }
    TensorMeta got{d.shape, d.dtype};
    if (d.bytes > kMaxBytes) return which + " is larger than the limit (64 GiB)";
    if (got.dtype == meta[i].dtype && got.shape.size() == meta[i].shape.size() &&
        std::equal(got.shape.begin() + (got.shape.empty() ? 0 : 1), got.shape.end(),
                   meta[i].shape.begin() + (got.shape.empty() ? 0 : 1)))
      continue;
    // The batch dimension may differ: the expectation is written with the sender's.
    TensorMeta want = meta[i];
    if (!want.shape.empty() && want.shape.size() == got.shape.size()) want.shape[0] = got.shape[0];
    return which + " is " + compact_string(got) + ", " + expects + kind + compact_string(want);
  }
  return {};
}

Acceptance StageWorker::accept(const Notification& n, bool from_elsewhere,
                               std::function<void(const Notification&)> arrived) {
  Acceptance out;
  if (from_elsewhere) {
    if (NotificationCheck check = check_notification(n); !check.accepted()) {
      note_rejected_message(rank_, "notification " + check.error);
      out.kind = Acceptance::Kind::Rejected;
      out.error = std::move(check.error);
      out.mismatch = std::move(check.mismatch);
      return out;
    }
  }
  if (message_log_enabled()) out.received_at = message_log_now_us();
  try {
    out.kind =
        post_receive(n, std::move(arrived)) ? Acceptance::Kind::Arrived : Acceptance::Kind::Posted;
  } catch (const std::exception& e) {
    out.kind = Acceptance::Kind::Failed;
    out.error = e.what();
  }
  return out;
}

void StageWorker::log_received(const Notification& n, const Acceptance& a) const {
  if (a.kind == Acceptance::Kind::Rejected || a.received_at == 0) return;  // refused, or log off
  log_event_at(rank_, n.step, "recv", describe(n), a.received_at);
}

bool StageWorker::post_receive(const Notification& n,
                               std::function<void(const Notification&)> arrived) {
  PipelineStage& s = stage(n.stage);
  // Exactly one of the poster and the callback sees the other's mark: the later one acts.
  auto mark = std::make_shared<std::atomic<bool>>(false);
  const PipelineTag key = n.tag();
  channel_->post_receive(
      n.source, key_of(key), n.tensors, s.device(), transfer_timeout_,
      [received = received_, key, mark, arrived = std::move(arrived),
       note = Notification{n.step, n.stage, n.direction, n.microbatch, n.source, {}}](
          std::vector<Tensor> tensors, std::string error) {
        {
          std::lock_guard lock(received->mutex);
          received->entries[key] = Received{std::move(tensors), std::move(error)};
        }
        if (mark->exchange(true)) arrived(note);
      });
  return mark->exchange(true);
}

void StageWorker::on_arrival(const Notification& n) {
  {
    std::lock_guard lock(received_->mutex);
    auto it = received_->entries.find(n.tag());
    if (it != received_->entries.end() && !it->second.error.empty()) {
      std::string error = std::move(it->second.error);
      received_->entries.erase(it);
      throw transport::TransferError(error);
    }
  }
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

void StageWorker::fail_arrival(const Notification& n, std::string error) {
  std::lock_guard lock(received_->mutex);
  received_->entries[n.tag()] = Received{{}, std::move(error)};
}

bool StageWorker::keep_rejection(const Notification& n, std::string mismatch) {
  constexpr size_t kMaxKept = 16;  // a flood is counted, not kept
  std::lock_guard lock(rejections_mutex_);
  if (rejections_.size() >= kMaxKept) return false;
  rejections_.push_back(
      {{n.step, n.stage, n.direction, n.microbatch, n.source, {}}, std::move(mismatch)});
  return rejections_.size() == 1;
}

std::vector<StageWorker::Rejection> StageWorker::take_rejections() {
  std::lock_guard lock(rejections_mutex_);
  return std::exchange(rejections_, {});
}

void StageWorker::set_stream(uint32_t stream, bool over_channel) {
  stream_ = stream;
  notify_over_channel_ = over_channel && channel_->carries_messages();
}

transport::TransferKey StageWorker::key_of(const PipelineTag& tag) const {
  return pipeline_key(stream_, tag);
}

std::vector<Tensor> StageWorker::take(const PipelineTag& tag) {
  std::lock_guard lock(received_->mutex);
  auto it = received_->entries.find(tag);
  if (it == received_->entries.end())
    throw std::logic_error("rank " + std::to_string(rank_) + ": " + to_string(tag) +
                           " was marked present but never arrived");
  if (!it->second.error.empty()) throw transport::TransferError(it->second.error);
  std::vector<Tensor> out = std::move(it->second.tensors);
  received_->entries.erase(it);
  adopt_memory(out);  // what came from another process is the receiving stage's
  // An input its maker let go of (a recomputing stage) is the receiving stage's alone.
  if (tag.direction == Direction::Forward) take_over_memory(out);
  return out;
}

void StageWorker::deliver(const PipelineTag& tag, std::vector<Tensor> tensors,
                          const NotificationSink& send) {
  if (hosts(tag.stage)) {  // the V schedules' turn: hand over inside the rank
    std::lock_guard lock(received_->mutex);
    received_->entries[tag] = Received{std::move(tensors), {}};
    return;
  }
  int peer = stage_to_peer_.at(tag.stage);
  std::vector<transport::TensorDescriptor> descriptors =
      channel_->send(peer, key_of(tag), std::move(tensors));
  Notification note{tag.step,       tag.stage,  tag.direction,
                    tag.microbatch, self_peer_, std::move(descriptors)};
  if (notify_over_channel_) {
    const long long sent_at = message_log_enabled() ? message_log_now_us() : 0;
    channel_->send_message(peer, stream_, encode_message(note));
    if (sent_at != 0) log_event_at(rank_, note.step, "send", describe(note), sent_at);
    return;
  }
  send(std::move(note));
}

bool StageWorker::finished() const { return step_ && policy().finished(); }

bool StageWorker::needs_rank(const std::vector<int>& stage_to_rank, int rank) const {
  if (!step_ || finished()) return false;
  for (PipelineStage* s : stages_) {
    const int index = s->stage_index();
    const bool input_from_rank = index > 0 && stage_to_rank.at(index - 1) == rank;
    const bool grad_from_rank =
        step_->training && index + 1 < num_stages_ && stage_to_rank.at(index + 1) == rank;
    for (int mb = 0; mb < n_microbatches_; ++mb) {
      if (input_from_rank && !ready_.has_input(index, mb) &&
          !ready_.is_completed(schedules::make_action(index, ActionKind::Forward, mb)))
        return true;
      if (grad_from_rank && !ready_.has_grad(index, mb) &&
          !ready_.is_completed(schedules::make_action(index, ActionKind::BackwardInput, mb)))
        return true;
    }
  }
  return false;
}

std::string StageWorker::describe_wait() const {
  if (!step_) return "rank " + std::to_string(rank_) + ": no step started";
  return "rank " + std::to_string(rank_) + ": " + policy().describe_wait(ready_);
}

std::string StageWorker::running() const {
  std::lock_guard lock(busy_mutex_);
  if (!busy_) return {};
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  busy_since_)
                .count();
  return "rank " + std::to_string(rank_) + " is running " + to_string(*busy_) + " for " +
         std::to_string(ms) + " ms";
}

void StageWorker::abort_step(uint64_t failed_step) {
  for (PipelineStage* s : stages_) {
    s->clear();
    detail::abandon_sharding(*s);
  }
  if (step_) {
    policy().reset();
    // Keep what later steps already sent; drop this step's.
    uint64_t step = step_->step;
    std::erase_if(early_, [step](const Notification& n) { return n.step <= step; });
    std::lock_guard lock(received_->mutex);
    std::erase_if(received_->entries,
                  [step](const auto& entry) { return entry.first.step == step; });
  }
  ready_.reset();
  step_.reset();
  aborted_step_.store(failed_step, std::memory_order_release);
}

class StageWorker::BusyScope {
 public:
  BusyScope(StageWorker& worker, const Action& action) : worker_(worker) {
    std::lock_guard lock(worker_.busy_mutex_);
    worker_.busy_ = action;
    worker_.busy_since_ = std::chrono::steady_clock::now();
  }
  ~BusyScope() {
    std::lock_guard lock(worker_.busy_mutex_);
    worker_.busy_.reset();
  }
  BusyScope(const BusyScope&) = delete;
  BusyScope& operator=(const BusyScope&) = delete;

 private:
  StageWorker& worker_;
  ComputeScope computing_;  // pollers of a one-core rank leave the core to this action
};

bool StageWorker::run_ready(const NotificationSink& send, const ActionObserver& observe,
                            const std::function<bool()>& should_yield) {
  if (!step_) return false;
  schedules::SchedulePolicy& p = policy();
  while (!p.finished()) {
    std::optional<Action> action = p.next(ready_);
    if (!action) {
      prepare_while_waiting();
      return false;
    }
    if (observe) observe("start", *action);
    {
      const BusyScope busy(*this, *action);
      run(*action, send);
    }
    ready_.completed(*action);
    p.completed(*action);
    if (observe) observe("finish", *action);
    if (message_log_enabled())  // tp-trace's memory track: what the rank holds after the action
      log_event(rank_, step_->step, "memory",
                "bytes:" + std::to_string(rank_memory_bytes(stages_)));
    if (should_yield && !p.finished() && should_yield()) return true;
  }
  return false;
}

void StageWorker::prepare_while_waiting() {
  const std::optional<Action> next = policy().next_in_order();
  if (!next || !hosts(next->stage) || !schedules::is_input_backward(next->kind)) return;
  PipelineStage& s = stage(next->stage);
  if (!s.can_recompute_ahead(next->microbatch)) return;
  const auto start = std::chrono::steady_clock::now();
  {
    const BusyScope busy(*this, *next);  // status requests see the rank computing
    const MemoryScope memory(s.memory_account());
    s.recompute_ahead(next->microbatch);
  }
  if (message_log_enabled()) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    log_event(rank_, step_->step, "recompute",
              to_string(*next) + " ahead us:" + std::to_string(us));
  }
}

void StageWorker::run(const Action& action, const NotificationSink& send, bool in_pair) {
  // What the action allocates is its stage's (an OverlapFB pair's sub-actions set their own).
  const MemoryScope memory(action.kind != ActionKind::OverlapFB && hosts(action.stage)
                               ? stage(action.stage).memory_account()
                               : nullptr);
  switch (action.kind) {
    case ActionKind::Forward: {
      // A recomputing stage keeps the activations when the rank's next action is this
      // microbatch's backward, which would rebuild them at once.
      const std::optional<Action> next = policy().next_in_order();
      forward(action.stage, action.microbatch, send,
              !in_pair && next && schedules::is_backward_of(*next, action));
      return;
    }
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
      if (step_->overlap_fb) {  // register_custom_function
        step_->overlap_fb(action, rank_, [&](const Action& sub) { run(sub, send, true); });
        return;
      }
      // On one CPU thread (or one stream) the pair runs back to back; the schedule still gains
      // from the order it implies.
      for (const Action& sub : action.sub_actions) run(sub, send, true);
      return;
    case ActionKind::Unshard:
    case ActionKind::Reshard:
    case ActionKind::ReduceGrad:
      detail::run_sharding_action(stage(action.stage), action.kind);
      return;
    default:
      throw std::logic_error("stage worker got communication action " + to_string(action) +
                             ": communication is implied by the compute order");
  }
}

void StageWorker::forward(int stage_index, int mb, const NotificationSink& send,
                          bool keep_activations) {
  PipelineStage& s = stage(stage_index);
  std::vector<Tensor> inputs;
  if (s.is_first()) {
    inputs = step_->microbatch_inputs.at(mb);
  } else {
    inputs = take({step_->step, stage_index, Direction::Forward, mb});
  }
  std::vector<Tensor> outputs;
  if (step_->training) {
    outputs = s.forward(mb, inputs, step_->kwargs_of(stage_index, mb), keep_activations);
  } else {
    NoGradGuard no_grad;
    outputs = s.forward(mb, inputs, step_->kwargs_of(stage_index, mb));
  }
  if (s.is_last()) {
    std::lock_guard lock(step_->results_mutex);
    if (step_->keep_outputs) {
      if (step_->outputs.size() != static_cast<size_t>(n_microbatches_))
        step_->outputs.resize(n_microbatches_);
      step_->outputs[mb] = outputs;
    }
    if (step_->loss_fn && !step_->targets.empty()) {
      Tensor loss;
      if (step_->training) {
        loss = s.compute_loss(mb, step_->targets.at(mb), step_->loss_fn);
      } else {
        NoGradGuard no_grad;
        loss = step_->loss_fn(outputs, step_->targets.at(mb).to(s.device())).detach();
      }
      if (step_->losses.size() != static_cast<size_t>(n_microbatches_))
        step_->losses.resize(n_microbatches_);
      step_->losses[mb] = loss;
    }
    return;
  }
  deliver({step_->step, stage_index + 1, Direction::Forward, mb}, std::move(outputs), send);
}

void StageWorker::backward(int stage_index, int mb, bool input_only, const NotificationSink& send) {
  PipelineStage& s = stage(stage_index);
  std::vector<Tensor> output_grads;
  if (!s.is_last()) {
    output_grads = take({step_->step, stage_index, Direction::Backward, mb});
  } else if (!step_->loss_fn || step_->targets.empty()) {
    throw std::invalid_argument(
        "training step without a loss: pass a loss function to the schedule and a target to "
        "step()");
  }
  std::vector<Tensor> input_grads =
      input_only ? s.backward_input(mb, output_grads, step_->loss_scale_of(mb))
                 : s.backward(mb, output_grads, step_->loss_scale_of(mb));
  if (s.is_first()) return;
  deliver({step_->step, stage_index - 1, Direction::Backward, mb}, std::move(input_grads), send);
}

}  // namespace tensorplay::pipelining
