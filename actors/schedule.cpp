// Schedule driver: builds one StageWorker and stage actor per rank hosted here (every rank in the
// embedded default, this process's rank under a launcher), then runs steps by sending each local
// rank the step and waiting (with a deadline) until it reports done.
#include "actors/schedule.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "actors/detail/caf_messages.h"
#include "actors/detail/caf_system.h"
#include "actors/detail/cluster.h"
#include "actors/detail/given_order.h"
#include "actors/detail/remote_error.h"
#include "actors/detail/schedule_impl.h"
#include "actors/detail/stage_actor.h"
#include "actors/detail/step_io.h"
#include "actors/detail/wire_note.h"
#include "actors/message_log.h"
#include "actors/process_group.h"
#include "actors/stage_worker.h"
#include "schedules/policy.h"
#include "stages/tied_parameters.h"
#include "transport/local_channel.h"
#include "transport/nccl_channel.h"

namespace tensorplay::pipelining {

using schedules::Action;
using schedules::ActionKind;

namespace detail {

schedules::RankOrder forward_only(const schedules::RankOrder& order) {
  schedules::RankOrder out;
  for (const Action& a : order) {
    if (a.kind == ActionKind::Forward) out.push_back(a);
    if (a.kind == ActionKind::OverlapFB)
      for (const Action& sub : a.sub_actions)
        if (sub.kind == ActionKind::Forward) out.push_back(sub);
  }
  return out;
}

}  // namespace detail

namespace {

/// The share of a step's time budget spent, after a timeout, on asking the ranks what they wait
/// for and on stopping them: the caller gets its error within step_timeout plus twice this.
std::chrono::milliseconds wind_down_budget(std::chrono::milliseconds step_timeout) {
  return std::clamp(step_timeout / 40, std::chrono::milliseconds(5),
                    std::chrono::milliseconds(1000));
}

/// Holds the schedule's one-step-at-a-time flag for a step.
class StepGuard {
 public:
  StepGuard(std::atomic<bool>& flag, const std::string& name) : flag_(flag) {
    if (flag_.exchange(true))
      throw std::logic_error(name +
                             ".step: another thread is running a step of this schedule; a "
                             "schedule runs one step at a time (wait for it, or build a "
                             "second schedule over other stages)");
  }
  ~StepGuard() { flag_.store(false); }
  StepGuard(const StepGuard&) = delete;
  StepGuard& operator=(const StepGuard&) = delete;

 private:
  std::atomic<bool>& flag_;
};

}  // namespace

void PipelineSchedule::Impl::find_group() {
  std::string name(schedules::schedule_name(kind));
  if (stages.empty()) throw std::invalid_argument(name + ": no stages given");
  for (const auto& s : stages)
    if (!s) throw std::invalid_argument(name + ": a stage is null");
  num_stages = stages[0]->num_stages();
  distributed = static_cast<int>(stages.size()) != num_stages;
  if (distributed && distributed::get_world_size() == 1)
    throw std::invalid_argument(
        name + ": this process hosts " + std::to_string(stages.size()) + " of " +
        std::to_string(num_stages) +
        " stages and is not part of a multi-process job; the embedded single-process runtime "
        "needs every stage, and multi-process runs start one process per rank under a launcher "
        "(tp-launch) and call tensorplay::distributed::init_process_group() first");
  if (distributed) {
    group_ranks = stages[0]->group_ranks();
    for (const auto& s : stages)
      if (s->group_ranks() != group_ranks)
        throw std::invalid_argument(name + ": stages " + std::to_string(stages[0]->stage_index()) +
                                    " and " + std::to_string(s->stage_index()) +
                                    " were built for different process groups");
    if (group_ranks.empty()) group_ranks = distributed::world_group().ranks();
  }
}

void PipelineSchedule::Impl::check_stages() {
  std::string name(schedules::schedule_name(kind));
  std::sort(stages.begin(), stages.end(),
            [](const auto& a, const auto& b) { return a->stage_index() < b->stage_index(); });
  std::set<int> seen;
  for (const auto& s : stages) {
    if (s->num_stages() != num_stages)
      throw std::invalid_argument(name + ": stages disagree on the stage count (" +
                                  std::to_string(num_stages) + " and " +
                                  std::to_string(s->num_stages()) + ")");
    if (!seen.insert(s->stage_index()).second)
      throw std::invalid_argument(name + ": stage " + std::to_string(s->stage_index()) +
                                  " given twice");
  }
  if (n_microbatches < 1)
    throw std::invalid_argument(name + ": n_microbatches must be at least 1, got " +
                                std::to_string(n_microbatches));
  if (options.stages_per_rank < 0)
    throw std::invalid_argument(name +
                                ": ScheduleOptions::stages_per_rank must be 0 (the "
                                "schedule's default) or positive, got " +
                                std::to_string(options.stages_per_rank));
  if (options.step_timeout.count() <= 0)
    throw std::invalid_argument(name + ": ScheduleOptions::step_timeout must be positive, got " +
                                std::to_string(options.step_timeout.count()) + " ms");
  if (options.transfer_timeout.count() <= 0)
    throw std::invalid_argument(name +
                                ": ScheduleOptions::transfer_timeout must be positive, got " +
                                std::to_string(options.transfer_timeout.count()) + " ms");
  for (const auto& s : stages)
    if (s->pipe_id() != 0 && stages[0]->pipe_id() != 0 && s->pipe_id() != stages[0]->pipe_id())
      throw std::invalid_argument(
          name + ": stages " + std::to_string(stages[0]->stage_index()) + " and " +
          std::to_string(s->stage_index()) +
          " were built from different pipelines (two pipeline() calls, perhaps of two models); "
          "build every stage of a schedule from one Pipe");
  for (const auto& s : stages) {
    s->claim(this, name);
    claimed.push_back(s.get());
  }
}

PipelineSchedule::PipelineSchedule(std::vector<std::shared_ptr<PipelineStage>> stages,
                                   int n_microbatches, LossFn loss_fn, schedules::ScheduleKind kind,
                                   ScheduleOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& im = *impl_;
  im.stages = std::move(stages);
  im.n_microbatches = n_microbatches;
  im.loss_fn = std::move(loss_fn);
  im.kind = kind;
  im.options = std::move(options);
  im.find_group();
  // Across processes, a rank's own reason to fail is shared at the meeting below, so that every
  // rank fails with it at once instead of waiting for this one.
  std::string local_error;
  try {
    im.check_local();
  } catch (const std::exception& e) {
    if (!im.distributed) throw;
    local_error = detail::encode_error(e);  // the other ranks throw it with its type
  }
  if (im.distributed)
    im.setup_distributed(local_error);
  else
    im.setup_embedded();
  try {
    im.setup_data_parallel();
  } catch (...) {
    // No destructor runs for a constructor that throws: the stage actors stop here.
    for (const caf::actor& a : im.local_actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    if (im.messages_registered) im.channel->set_message_handler(im.stream, nullptr);
    throw;
  }
}

void PipelineSchedule::Impl::check_local() {
  check_stages();
  std::string name(schedules::schedule_name(kind));
  if (schedules::is_single_stage_per_rank(kind)) {
    stages_per_rank = 1;
  } else {
    stages_per_rank = options.stages_per_rank > 0 ? options.stages_per_rank
                                                  : schedules::default_stages_per_rank(kind);
  }
  if (num_stages % stages_per_rank != 0)
    throw std::invalid_argument(name + ": " + std::to_string(num_stages) +
                                " stages cannot be placed " + std::to_string(stages_per_rank) +
                                " per rank");
  ranks = num_stages / stages_per_rank;
  order = schedules::generate_order(kind, ranks, stages_per_rank, n_microbatches);
  stage_to_rank = schedules::stage_to_rank(kind, ranks, stages_per_rank);
  if (!options.order.empty())
    order = detail::checked_order(name, options.order, num_stages, n_microbatches, stage_to_rank);
  // Ranks run concurrently: a parameter tensor shared by stages on two ranks would have its
  // gradient accumulated by two threads at once.
  std::map<const TensorImpl*, std::pair<int, std::string>> owners;  // tensor -> (stage, name)
  for (const auto& s : stages) {
    for (const auto& [param_name, p] : s->module().named_parameters()) {
      auto [it, fresh] =
          owners.emplace(p.impl_ptr().get(), std::make_pair(s->stage_index(), param_name));
      const auto& [other_stage, other_name] = it->second;
      if (!fresh && stage_to_rank[other_stage] != stage_to_rank[s->stage_index()])
        throw std::invalid_argument(
            name + ": parameter '" + param_name + "' of stage " + std::to_string(s->stage_index()) +
            " is the same tensor as '" + other_name + "' of stage " + std::to_string(other_stage) +
            ", and the two run on different ranks at once; give each stage its own copy and "
            "tie the copies (build_stages does this for tied weights), or place both stages on "
            "one rank");
    }
  }
}

void PipelineSchedule::Impl::setup_embedded() {
  channel = std::make_shared<transport::LocalChannel>();
  caf::actor_system& system = detail::process_actor_system();
  for (const auto& s : stages) s->set_concurrent_threads(ranks);  // each actor its core share
  for (int r = 0; r < ranks; ++r) {
    std::vector<PipelineStage*> local;
    for (const auto& s : stages)
      if (stage_to_rank[s->stage_index()] == r) local.push_back(s.get());
    auto worker = std::make_shared<StageWorker>(
        r, local, num_stages, n_microbatches, training_policy(r),
        schedules::make_static_order_policy(detail::forward_only(order[r])), channel,
        options.transfer_timeout);
    actors.push_back(
        detail::spawn_stage_actor(system, worker, stage_to_rank, false, stages_handle()));
    status_actors.push_back(detail::spawn_status_actor(system, worker, actors.back()));
    local_workers.push_back(worker);
  }
  local_actors = actors;
  caf::scoped_actor self{system};
  for (const caf::actor& a : actors)
    self->send(a, detail::peers_atom::value, actors, std::vector<std::string>{});
}

PipelineScheduleSingle::PipelineScheduleSingle(std::vector<std::shared_ptr<PipelineStage>> stages,
                                               int n_microbatches, LossFn loss_fn,
                                               schedules::ScheduleKind kind,
                                               ScheduleOptions options)
    : PipelineSchedule(std::move(stages), n_microbatches, std::move(loss_fn), kind,
                       std::move(options)) {}

PipelineScheduleSingle::PipelineScheduleSingle(PipelineStage& stage, int n_microbatches,
                                               LossFn loss_fn, schedules::ScheduleKind kind,
                                               ScheduleOptions options)
    : PipelineSchedule({std::shared_ptr<PipelineStage>(std::shared_ptr<PipelineStage>(), &stage)},
                       n_microbatches, std::move(loss_fn), kind, std::move(options)) {}

PipelineScheduleMulti::PipelineScheduleMulti(std::vector<std::shared_ptr<PipelineStage>> stages,
                                             int n_microbatches, LossFn loss_fn,
                                             schedules::ScheduleKind kind, ScheduleOptions options)
    : PipelineSchedule(std::move(stages), n_microbatches, std::move(loss_fn), kind,
                       std::move(options)) {}

std::vector<int> stages_of_rank(schedules::ScheduleKind kind, int rank, int num_stages,
                                int stages_per_rank) {
  int spr = schedules::is_single_stage_per_rank(kind) ? 1
            : stages_per_rank > 0                     ? stages_per_rank
                                                      : schedules::default_stages_per_rank(kind);
  if (num_stages < 1 || num_stages % spr != 0)
    throw std::invalid_argument("stages_of_rank: " + std::to_string(num_stages) +
                                " stages cannot be placed " + std::to_string(spr) + " per rank");
  int ranks = num_stages / spr;
  if (rank < 0 || rank >= ranks)
    throw std::invalid_argument("stages_of_rank: rank " + std::to_string(rank) +
                                " is out of range for " + std::to_string(ranks) + " ranks");
  std::vector<int> placement = schedules::stage_to_rank(kind, ranks, spr);
  std::vector<int> out;
  for (int s = 0; s < num_stages; ++s)
    if (placement[s] == rank) out.push_back(s);
  return out;
}

PipelineSchedule::~PipelineSchedule() {
  if (impl_->local_actors.empty()) return;
  if (impl_->messages_registered) impl_->channel->set_message_handler(impl_->stream, nullptr);
  // Stop this process's stage actors and wait for them, for a bounded time: an actor stuck in
  // a stage's compute ends when that returns (it holds the stages alive until then), and is
  // reported rather than waited for.
  caf::scoped_actor self{detail::process_actor_system()};
  for (const caf::actor& a : impl_->local_actors) {
    self->monitor(a);
    self->send_exit(a, caf::exit_reason::user_shutdown);
  }
  constexpr auto kExitWait = std::chrono::seconds(2);
  auto deadline = std::chrono::steady_clock::now() + kExitWait;
  std::set<caf::actor_addr> running;
  for (const caf::actor& a : impl_->local_actors) running.insert(a.address());
  while (!running.empty()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    self->receive([&](const caf::down_msg& m) { running.erase(m.source); },
                  caf::after(left) >> [] {});
  }
  if (!running.empty()) {
    // The stuck actor still computes on the stages: nobody else may take them meanwhile.
    std::string name(schedules::schedule_name(impl_->kind));
    for (PipelineStage* s : impl_->claimed)
      s->claim(impl_.get(), name + " schedule destroyed while this stage was stuck in compute");
    impl_->claimed.clear();
  }
  for (size_t r = 0; r < impl_->local_actors.size() && !running.empty(); ++r) {
    if (!running.count(impl_->local_actors[r].address())) continue;
    std::string busy = impl_->local_workers.at(r)->running();
    std::fprintf(stderr,
                 "tensorplay: %s: a stage actor did not stop within %lld s (%s); it is detached "
                 "and ends when its stage's compute returns\n",
                 std::string(schedules::schedule_name(impl_->kind)).c_str(),
                 static_cast<long long>(kExitWait.count()), busy.empty() ? "busy" : busy.c_str());
  }
}

std::vector<std::string> PipelineSchedule::Impl::abort_all(
    uint64_t step, std::chrono::steady_clock::time_point deadline) {
  for (const caf::actor& a : local_actors)
    caf::anon_send<caf::message_priority::high>(a, detail::abort_atom::value, step);
  std::vector<std::string> stuck;
  for (const auto& worker : local_workers) {
    // A rank between actions drops the step at once; one inside a stage's compute cannot.
    while (worker->aborted_step() < step && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (worker->aborted_step() < step) {
      std::string busy = worker->running();
      stuck.push_back(busy.empty() ? "rank " + std::to_string(worker->rank()) +
                                         " had not dropped the step yet"
                                   : busy);
    }
  }
  // This step's posted receives end now (the channel is shared with other schedules across
  // processes: only this schedule's stream).
  if (distributed)
    channel->cancel_stream(stream);
  else
    channel->cancel_all();
  return stuck;
}

std::string PipelineSchedule::Impl::collect_status(caf::scoped_actor& self, uint64_t step,
                                                   std::chrono::steady_clock::time_point deadline) {
  // All requests go out at once; each answer is awaited until the common deadline.
  auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                           deadline - std::chrono::steady_clock::now()),
                       std::chrono::milliseconds(1));
  std::vector<std::string> answers(status_actors.size());
  using Handle = decltype(self->request<caf::message_priority::high>(
      status_actors[0], left, detail::status_atom::value, step));
  std::vector<Handle> pending;
  for (const caf::actor& a : status_actors)
    pending.push_back(
        self->request<caf::message_priority::high>(a, left, detail::status_atom::value, step));
  for (size_t r = 0; r < pending.size(); ++r) {
    pending[r].receive([&](const std::string& s) { answers[r] = s; },
                       [&](const caf::error&) {
                         answers[r] = describe_rank(static_cast<int>(r)) +
                                      " did not answer within " + std::to_string(left.count()) +
                                      " ms (stopped, or its process is busy)";
                       });
  }
  // The ranks computing come first: one stuck in compute is the likely cause, the ranks waiting
  // for it are its consequence.
  std::stable_partition(answers.begin(), answers.end(), [](const std::string& a) {
    return a.find(" is running ") != std::string::npos ||
           a.find(" did not answer ") != std::string::npos;
  });
  std::string out;
  for (const std::string& a : answers) out += " [" + a + "]";
  return out;
}

void PipelineSchedule::Impl::check_not_stuck(const std::string& name) {
  if (last_failed_step == 0) return;
  for (const auto& worker : local_workers) {
    if (worker->aborted_step() >= last_failed_step) continue;
    std::string busy = worker->running();
    throw PipelineError(name + ".step: step " + std::to_string(last_failed_step) +
                        " failed and a stage is still in it (" +
                        (busy.empty()
                             ? "rank " + std::to_string(worker->rank()) + " has not dropped it yet"
                             : busy) +
                        "); a step cannot start until every stage has returned (fix what keeps "
                        "the stage busy, or destroy this schedule and build a new one)");
  }
  last_failed_step = 0;
}

StepOutput PipelineSchedule::Impl::run_step(const std::vector<Tensor>& inputs,
                                            const nn::TensorDict& kwargs,
                                            const StepOptions& step_options, bool training) {
  std::string name(schedules::schedule_name(kind));
  StepGuard one_at_a_time(stepping, name);
  check_not_stuck(name);
  const uint64_t step = next_step++;  // consumed even when the step fails: ranks stay in step
  PipelineStage* first = stages.front()->is_first() ? stages.front().get() : nullptr;
  bool hosts_last = stages.back()->is_last();
  auto data = std::make_shared<StepData>();
  try {
    std::string where = distributed ? " on " + describe_rank(my_rank) : "";
    if (training && hosts_last && !loss_fn && !options.outputs_loss_fn)
      throw std::invalid_argument(name + ".step" + where +
                                  ": training needs a loss function; pass one to the "
                                  "schedule, or call eval() for forward only");
    if (training && hosts_last && !step_options.target.defined())
      throw std::invalid_argument(name + ".step" + where +
                                  ": training needs a target (StepOptions::target)" +
                                  (distributed ? " on the rank hosting the last stage" : ""));
    if (distributed && !first && (!inputs.empty() || !kwargs.empty()))
      throw std::invalid_argument(
          name + ".step" + where + ": got " + std::to_string(inputs.size()) +
          " input(s), but this rank does not host stage 0; only the rank hosting stage 0 feeds "
          "inputs (call step({}) here, as in PyTorch)");
    if (distributed && first && inputs.empty() && kwargs.empty())
      throw std::invalid_argument(name + ".step" + where +
                                  ": this rank hosts stage 0 and must pass the batch's inputs");
    data->step = step;
    data->training = training;
    if (options.outputs_loss_fn)
      data->loss_fn = options.outputs_loss_fn;
    else
      data->loss_fn = loss_fn;
    data->overlap_fb = detail::overlap_runner(overlap_fb);
    data->loss_scale = options.scale_grads ? 1.0f / static_cast<float>(n_microbatches) : 1.0f;
    detail::prepare_step(*data, {name, n_microbatches, first, hosts_last, &options}, inputs, kwargs,
                         step_options);
  } catch (const std::exception& e) {
    fail_step_everywhere(step, e.what());
    if (training && reducer) abandon_data_parallel(step, e.what());
    throw;
  }

  std::vector<PipelineStage*> local = stage_pointers(stages);
  TiedGradients tied;
  if (training) tied = begin_tied_step(local);
  if (training && reducer) reducer->begin_step(step, sync_gradients, tied_copies());

  caf::scoped_actor self{detail::process_actor_system()};
  // Last rank first: every rank has its step before any neighbour can notify it.
  for (auto it = local_actors.rbegin(); it != local_actors.rend(); ++it)
    self->send(*it, detail::step_atom::value, data->step, detail::StepHandle(data));

  int done = 0;
  std::string failure;
  bool timed_out = false;
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + options.step_timeout;
  const int expected = static_cast<int>(local_actors.size());
  while (done < expected && failure.empty() && !timed_out) {
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    self->receive(
        [&](detail::done_atom, uint64_t step, int) {
          if (step == data->step) ++done;
        },
        [&](detail::failed_atom, uint64_t step, int rank, const std::string& what) {
          if (step == data->step) failure = describe_rank(rank) + " failed: " + what;
        },
        caf::after(left) >> [&] { timed_out = true; });
  }
  const auto wind_down = wind_down_budget(options.step_timeout);
  if (timed_out) {
    failure = name + ": step " + std::to_string(data->step) + " did not finish within " +
              std::to_string(options.step_timeout.count()) + " ms;";
    // Ask every rank (in other processes too) what it waits for, with a short common deadline:
    // a rank computing answers through its status actor, a stopped process not at all.
    failure += collect_status(self, data->step, std::chrono::steady_clock::now() + wind_down);
  }
  std::vector<std::string> stuck;
  if (!failure.empty()) {
    // Quiesce the ranks before summing tied gradients: on a failure or timeout, others may
    // still be in a backward that writes those gradients. A rank stuck in compute is not
    // waited for: the next step refuses to start until it has returned.
    stuck = abort_all(data->step, std::chrono::steady_clock::now() + wind_down);
    last_failed_step = data->step;
    if (training && reducer) abandon_data_parallel(data->step, failure);
  }
  if (training && !distributed && stuck.empty()) finish_tied_step(local, std::move(tied));
  if (!failure.empty()) {
    std::string after;
    for (const std::string& s : stuck) after += " [" + s + ": it is not waited for]";
    if (training)
      after += " (gradients of this step are partial: zero_grad before retrying)";
    else
      after += " (eval computes no gradients; parameters are unchanged)";
    throw PipelineError(failure + after);
  }
  if (training && distributed) {
    // Copies in other processes: all-reduce each tie's local sum over the ranks holding one.
    finish_tied_step(local, std::move(tied), true, [&](const std::string& tie, Tensor& sum) {
      if (auto it = tie_groups.find(tie); it != tie_groups.end()) it->second.all_reduce(sum);
    });
  }
  // Data-parallel averaging: buckets already handed over during the backward are running or
  // done; the rest, and the tied parameters (now summed over their copies), go now.
  if (training && reducer) {
    try {
      reducer->finish_step(started + options.step_timeout);
    } catch (const std::exception& e) {
      abandon_data_parallel(data->step, e.what());
      throw;
    }
  }
  if (step_options.losses) {
    step_options.losses->clear();
    for (const Tensor& l : data->losses) step_options.losses->push_back(l);
  }
  if (!step_options.return_outputs) return {};
  return detail::collect_outputs(*data, options);
}

namespace {
Tensor first_output(const StepOutput& out) {
  return out.outputs.empty() ? Tensor() : out.outputs.front();
}
}  // namespace

Tensor PipelineSchedule::step(const std::vector<Tensor>& inputs, const StepOptions& options) {
  return first_output(impl_->run_step(inputs, {}, options, true));
}

StepOutput PipelineSchedule::step(const std::vector<Tensor>& args, const nn::TensorDict& kwargs,
                                  const StepOptions& options) {
  return impl_->run_step(args, kwargs, options, true);
}

Tensor PipelineSchedule::eval(const std::vector<Tensor>& inputs, const StepOptions& options) {
  return first_output(impl_->run_step(inputs, {}, options, false));
}

StepOutput PipelineSchedule::eval(const std::vector<Tensor>& args, const nn::TensorDict& kwargs,
                                  const StepOptions& options) {
  return impl_->run_step(args, kwargs, options, false);
}

void PipelineSchedule::register_custom_function(schedules::ActionKind kind,
                                                CustomFunction function) {
  detail::check_custom_kind(kind);
  impl_->overlap_fb = std::move(function);
}

bool PipelineSchedule::is_distributed() const { return impl_->distributed; }
uint32_t PipelineSchedule::transport_stream() const { return impl_->stream; }
const schedules::PipelineOrder& PipelineSchedule::order() const { return impl_->order; }
schedules::ScheduleKind PipelineSchedule::kind() const { return impl_->kind; }
int PipelineSchedule::num_microbatches() const { return impl_->n_microbatches; }
int PipelineSchedule::num_ranks() const { return impl_->ranks; }
const std::vector<std::shared_ptr<PipelineStage>>& PipelineSchedule::stages() const {
  return impl_->stages;
}

}  // namespace tensorplay::pipelining
