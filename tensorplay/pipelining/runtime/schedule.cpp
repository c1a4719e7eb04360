// Schedule driver: builds one StageWorker and stage actor per rank hosted here (every rank in the
// embedded default, this process's rank under a launcher), then runs steps by sending each local
// rank the step and waiting (with a deadline) until it reports done.
#include "tensorplay/pipelining/runtime/schedule.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "tensorplay/distributed/process_group.h"
#include "tensorplay/pipelining/runtime/detail/actor_ranks.h"
#include "tensorplay/pipelining/runtime/detail/remote_error.h"
#include "tensorplay/pipelining/runtime/detail/schedule_impl.h"
#include "tensorplay/pipelining/runtime/detail/stage_sharding.h"
#include "tensorplay/pipelining/runtime/detail/step_io.h"

namespace tensorplay::pipelining {

using schedules::Action;
using schedules::ActionKind;

namespace {

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
  const std::string name = spec.name();
  const auto& stages = spec.stages;
  if (stages.empty()) throw std::invalid_argument(name + ": no stages given");
  for (const auto& s : stages)
    if (!s) throw std::invalid_argument(name + ": a stage is null");
  const int num_stages = stages[0]->num_stages();
  if (static_cast<int>(stages.size()) == num_stages) return;  // every stage here: embedded
  if (spec.job_world_size() == 1)
    throw std::invalid_argument(
        name + ": this process hosts " + std::to_string(stages.size()) + " of " +
        std::to_string(num_stages) +
        " stages and is not part of a multi-process job; the embedded single-process runtime "
        "needs every stage, and multi-process runs start one process per rank under a launcher "
        "(tp-launch) and call tensorplay::distributed::init_process_group() first");
  group_ranks = stages[0]->group_ranks();
  for (const auto& s : stages)
    if (s->group_ranks() != group_ranks || s->get_mesh().job() != stages[0]->get_mesh().job())
      throw std::invalid_argument(name + ": stages " + std::to_string(stages[0]->stage_index()) +
                                  " and " + std::to_string(s->stage_index()) +
                                  " were built for different process groups");
  if (group_ranks.empty())
    for (int r = 0; r < spec.job_world_size(); ++r) group_ranks.push_back(r);
}

void PipelineSchedule::Impl::check_stages() {
  const std::string name = spec.name();
  auto& stages = spec.stages;
  const ScheduleOptions& options = spec.options;
  std::sort(stages.begin(), stages.end(),
            [](const auto& a, const auto& b) { return a->stage_index() < b->stage_index(); });
  const int num_stages = stages[0]->num_stages();
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
}

void PipelineSchedule::Impl::check_shared_parameters() const {
  // Ranks run concurrently: a parameter tensor shared by stages on two ranks would have its
  // gradient accumulated by two threads at once.
  const std::vector<int>& stage_to_rank = spec.placement.stage_to_rank;
  std::map<const TensorImpl*, std::pair<int, std::string>> owners;  // tensor -> (stage, name)
  for (const auto& s : spec.stages) {
    for (const auto& [param_name, p] : s->module().named_parameters()) {
      auto [it, fresh] =
          owners.emplace(p.impl_ptr().get(), std::make_pair(s->stage_index(), param_name));
      const auto& [other_stage, other_name] = it->second;
      if (!fresh && stage_to_rank[other_stage] != stage_to_rank[s->stage_index()])
        throw std::invalid_argument(
            spec.name() + ": parameter '" + param_name + "' of stage " +
            std::to_string(s->stage_index()) + " is the same tensor as '" + other_name +
            "' of stage " + std::to_string(other_stage) +
            ", and the two run on different ranks at once; give each stage its own copy and "
            "tie the copies (build_stages does this for tied weights), or place both stages on "
            "one rank");
    }
  }
}

void PipelineSchedule::Impl::check_local() {
  check_stages();
  spec.placement = place_stages(spec.kind, spec.stages[0]->num_stages(), spec.n_microbatches,
                                spec.options.stages_per_rank, spec.options.order);
  check_shared_parameters();
  detail::check_sharded_stages(spec.local_stages(), spec.name());
  for (const auto& s : spec.stages) {
    s->claim(this, spec.name());
    claimed.push_back(s.get());
  }
}

PipelineSchedule::PipelineSchedule(std::vector<std::shared_ptr<PipelineStage>> stages,
                                   int n_microbatches, LossFn loss_fn, schedules::ScheduleKind kind,
                                   ScheduleOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& im = *impl_;
  im.spec.stages = std::move(stages);
  im.spec.n_microbatches = n_microbatches;
  im.spec.loss_fn = std::move(loss_fn);
  im.spec.kind = kind;
  im.spec.options = std::move(options);
  im.find_group();
  const bool distributed = !im.group_ranks.empty();
  // Across processes, a rank's own reason to fail is shared when the ranks meet, so that every
  // rank fails with it at once instead of waiting for this one.
  RemoteError local_error;
  try {
    im.check_local();
  } catch (const std::exception& e) {
    if (!distributed) throw;
    local_error = detail::encode_error(e);  // the other ranks throw it with its type
  }
  im.ranks = distributed ? detail::make_process_ranks(im.spec, im.group_ranks, local_error)
                         : detail::make_embedded_ranks(im.spec);
  im.driver = std::make_unique<detail::StepDriver>(im.spec.name(), im.spec.options.step_timeout);
  try {
    im.hooks.add(detail::make_tied_gradient_hook(im.spec, im.group_ranks));
    if (auto dp = detail::DataParallelHook::make(im.spec, im.group_ranks)) {
      im.data_parallel = dp.get();
      im.hooks.add(std::move(dp));
    }
  } catch (...) {
    // No destructor runs for a constructor that throws: the stage actors stop here.
    im.ranks->stop(std::chrono::milliseconds(0));
    throw;
  }
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

PipelineSchedule::~PipelineSchedule() {
  if (!impl_->ranks) return;
  constexpr auto kExitWait = std::chrono::seconds(2);
  std::vector<std::string> stuck = impl_->ranks->stop(kExitWait);
  if (stuck.empty()) return;
  // The stuck actor still computes on the stages: nobody else may take them meanwhile.
  const std::string name = impl_->spec.name();
  for (PipelineStage* s : impl_->claimed)
    s->claim(impl_.get(), name + " schedule destroyed while this stage was stuck in compute");
  impl_->claimed.clear();
  for (const std::string& busy : stuck)
    std::fprintf(stderr,
                 "tensorplay: %s: a stage actor did not stop within %lld s (%s); it is detached "
                 "and ends when its stage's compute returns\n",
                 name.c_str(), static_cast<long long>(kExitWait.count()), busy.c_str());
}

std::shared_ptr<StepData> PipelineSchedule::Impl::prepare(uint64_t step,
                                                          const std::vector<Tensor>& inputs,
                                                          const nn::TensorDict& kwargs,
                                                          const StepOptions& step_options,
                                                          bool training) const {
  const std::string name = spec.name();
  const ScheduleOptions& options = spec.options;
  const bool distributed = ranks->distributed();
  PipelineStage* first = spec.stages.front()->is_first() ? spec.stages.front().get() : nullptr;
  const bool hosts_last = spec.stages.back()->is_last();
  const std::string where = distributed ? " on " + ranks->describe_rank(ranks->rank()) : "";
  if (training && hosts_last && !spec.loss_fn && !options.outputs_loss_fn)
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
  auto data = std::make_shared<StepData>();
  data->step = step;
  data->training = training;
  if (options.outputs_loss_fn)
    data->loss_fn = options.outputs_loss_fn;
  else
    data->loss_fn = spec.loss_fn;
  data->overlap_fb = detail::overlap_runner(overlap_fb);
  data->loss_scale = options.scale_grads ? 1.0f / static_cast<float>(spec.n_microbatches) : 1.0f;
  detail::prepare_step(*data, {name, spec.n_microbatches, first, hosts_last, &options}, inputs,
                       kwargs, step_options);
  return data;
}

StepOutput PipelineSchedule::Impl::run_step(const std::vector<Tensor>& inputs,
                                            const nn::TensorDict& kwargs,
                                            const StepOptions& step_options, bool training) {
  StepGuard one_at_a_time(stepping, spec.name());
  driver->check_not_stuck(*ranks);
  const uint64_t step = driver->next_step();  // consumed even when the step fails
  std::shared_ptr<StepData> data;
  try {
    data = prepare(step, inputs, kwargs, step_options, training);
  } catch (const std::exception& e) {
    ranks->fail_step_everywhere(step, e.what());
    if (training) hooks.abandon(step, e.what());
    throw;
  }
  const auto started = std::chrono::steady_clock::now();
  if (training) hooks.begin(step);
  const detail::StepOutcome outcome = driver->run(*ranks, data);
  if (training) hooks.ranks_stopped(step, !outcome.ok(), outcome.quiesced());
  if (!outcome.ok()) {
    if (training) hooks.abandon(step, outcome.failure);
    throw PipelineError(outcome.message(training));
  }
  if (training) hooks.finish(step, driver->deadline_of(started));
  if (step_options.losses) {
    step_options.losses->clear();
    for (const Tensor& l : data->losses) step_options.losses->push_back(l);
  }
  if (!step_options.return_outputs) return {};
  return detail::collect_outputs(*data, spec.options);
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

PipelineSchedule::NoSync::NoSync(PipelineSchedule& schedule)
    : schedule_(schedule), before_(schedule.requires_gradient_sync()) {
  schedule_.set_requires_gradient_sync(false);
}

PipelineSchedule::NoSync::~NoSync() { schedule_.set_requires_gradient_sync(before_); }

void PipelineSchedule::set_requires_gradient_sync(bool sync) {
  if (impl_->data_parallel) impl_->data_parallel->set_sync(sync);
  impl_->sync_gradients = sync;
}
bool PipelineSchedule::requires_gradient_sync() const { return impl_->sync_gradients; }

DataParallelStats PipelineSchedule::data_parallel_stats() const {
  return impl_->data_parallel ? impl_->data_parallel->stats() : DataParallelStats{};
}

bool PipelineSchedule::is_distributed() const { return impl_->ranks->distributed(); }
uint32_t PipelineSchedule::transport_stream() const { return impl_->ranks->stream(); }
const schedules::PipelineOrder& PipelineSchedule::order() const {
  return impl_->spec.placement.order;
}
schedules::ScheduleKind PipelineSchedule::kind() const { return impl_->spec.kind; }
int PipelineSchedule::n_microbatches() const { return impl_->spec.n_microbatches; }
int PipelineSchedule::num_ranks() const { return impl_->spec.placement.ranks; }
const std::vector<std::shared_ptr<PipelineStage>>& PipelineSchedule::stages() const {
  return impl_->spec.stages;
}

MemoryStats PipelineSchedule::memory_stats(const optim::Optimizer* optimizer) const {
  std::vector<int> stage_to_rank;
  const schedules::PipelineOrder& ranks = order();
  auto place = [&](int stage, int rank) {
    if (stage < 0) return;
    if (stage >= static_cast<int>(stage_to_rank.size())) stage_to_rank.resize(stage + 1, 0);
    stage_to_rank[stage] = rank;
  };
  for (size_t r = 0; r < ranks.size(); ++r)
    for (const schedules::Action& a : ranks[r]) {
      place(a.stage, static_cast<int>(r));
      for (const schedules::Action& sub : a.sub_actions) place(sub.stage, static_cast<int>(r));
    }
  return collect_memory_stats(stages(), stage_to_rank, optimizer);
}

}  // namespace tensorplay::pipelining
