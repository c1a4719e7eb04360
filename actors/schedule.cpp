// Schedule driver: builds one StageWorker and stage actor per rank, then runs steps by sending
// each rank the step and waiting (with a deadline) until every rank reports it done.
#include "actors/schedule.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "actors/detail/caf_messages.h"
#include "actors/detail/caf_system.h"
#include "actors/detail/stage_actor.h"
#include "actors/stage_worker.h"
#include "schedules/policy.h"
#include "stages/tied_parameters.h"
#include "transport/local_channel.h"

namespace tensorplay::pipelining {

using schedules::Action;
using schedules::ActionKind;

namespace {

/// The forward-only part of a rank's order (for eval).
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

}  // namespace

struct PipelineSchedule::Impl {
  std::vector<std::shared_ptr<PipelineStage>> stages;
  int n_microbatches = 0;
  LossFn loss_fn;
  schedules::ScheduleKind kind;
  ScheduleOptions options;
  int num_stages = 0;
  int ranks = 0;
  int stages_per_rank = 1;
  schedules::PipelineOrder order;
  std::vector<int> stage_to_rank;
  std::shared_ptr<transport::LocalChannel> channel = std::make_shared<transport::LocalChannel>();
  std::vector<caf::actor> actors;
  uint64_t next_step = 1;

  void check_stages();
  Tensor run_step(const std::vector<Tensor>& inputs, const StepOptions& step_options,
                  bool training);
  void abort_all(caf::scoped_actor& self);
};

void PipelineSchedule::Impl::check_stages() {
  std::string name(schedules::schedule_name(kind));
  if (stages.empty()) throw std::invalid_argument(name + ": no stages given");
  for (const auto& s : stages)
    if (!s) throw std::invalid_argument(name + ": a stage is null");
  num_stages = stages[0]->num_stages();
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
  if (static_cast<int>(stages.size()) != num_stages)
    throw std::invalid_argument(
        name + ": this process hosts " + std::to_string(stages.size()) + " of " +
        std::to_string(num_stages) +
        " stages; the embedded single-process runtime needs every stage (multi-process runs "
        "start one process per rank under a launcher)");
  if (n_microbatches < 1)
    throw std::invalid_argument(name + ": n_microbatches must be at least 1, got " +
                                std::to_string(n_microbatches));
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
  im.check_stages();
  std::string name(schedules::schedule_name(kind));
  if (schedules::is_single_stage_per_rank(kind)) {
    im.stages_per_rank = 1;
  } else {
    im.stages_per_rank = im.options.stages_per_rank > 0 ? im.options.stages_per_rank
                                                        : schedules::default_stages_per_rank(kind);
  }
  if (im.num_stages % im.stages_per_rank != 0)
    throw std::invalid_argument(name + ": " + std::to_string(im.num_stages) +
                                " stages cannot be placed " + std::to_string(im.stages_per_rank) +
                                " per rank");
  im.ranks = im.num_stages / im.stages_per_rank;
  im.order = schedules::generate_order(kind, im.ranks, im.stages_per_rank, n_microbatches);
  im.stage_to_rank = schedules::stage_to_rank(kind, im.ranks, im.stages_per_rank);
  // Ranks run concurrently: a parameter tensor shared by stages on two ranks would have its
  // gradient accumulated by two threads at once.
  std::map<const TensorImpl*, std::pair<int, std::string>> owners;  // tensor -> (stage, name)
  for (const auto& s : im.stages) {
    for (const auto& [param_name, p] : s->module().named_parameters()) {
      auto [it, fresh] =
          owners.emplace(p.impl_ptr().get(), std::make_pair(s->stage_index(), param_name));
      const auto& [other_stage, other_name] = it->second;
      if (!fresh && im.stage_to_rank[other_stage] != im.stage_to_rank[s->stage_index()])
        throw std::invalid_argument(
            name + ": parameter '" + param_name + "' of stage " + std::to_string(s->stage_index()) +
            " is the same tensor as '" + other_name + "' of stage " + std::to_string(other_stage) +
            ", and the two run on different ranks at once; give each stage its own copy and "
            "tie the copies (build_stages does this for tied weights), or place both stages on "
            "one rank");
    }
  }

  caf::actor_system& system = detail::process_actor_system();
  for (int r = 0; r < im.ranks; ++r) {
    std::vector<PipelineStage*> local;
    for (const auto& s : im.stages)
      if (im.stage_to_rank[s->stage_index()] == r) local.push_back(s.get());
    auto worker = std::make_shared<StageWorker>(
        r, local, im.num_stages, n_microbatches, schedules::make_static_order_policy(im.order[r]),
        schedules::make_static_order_policy(forward_only(im.order[r])), im.channel,
        im.options.transfer_timeout);
    im.actors.push_back(detail::spawn_stage_actor(system, worker, im.stage_to_rank));
  }
  caf::scoped_actor self{system};
  for (const caf::actor& a : im.actors) self->send(a, detail::peers_atom::value, im.actors);
}

PipelineSchedule::~PipelineSchedule() {
  if (impl_->actors.empty()) return;
  // Stop the stage actors and wait for them: their workers point at the stages.
  caf::scoped_actor self{detail::process_actor_system()};
  for (const caf::actor& a : impl_->actors) self->send_exit(a, caf::exit_reason::user_shutdown);
  self->wait_for(impl_->actors);
}

void PipelineSchedule::Impl::abort_all(caf::scoped_actor& self) {
  for (const caf::actor& a : actors) {
    self->request(a, std::chrono::seconds(30), detail::abort_atom::value)
        .receive([](bool) {}, [](const caf::error&) {});
  }
  channel->clear();
}

Tensor PipelineSchedule::Impl::run_step(const std::vector<Tensor>& inputs,
                                        const StepOptions& step_options, bool training) {
  std::string name(schedules::schedule_name(kind));
  if (training && !loss_fn)
    throw std::invalid_argument(name +
                                ".step: training needs a loss function; pass one to the "
                                "schedule, or call eval() for forward only");
  if (training && !step_options.target.defined())
    throw std::invalid_argument(name + ".step: training needs a target (StepOptions::target)");
  auto data = std::make_shared<StepData>();
  data->step = next_step++;
  data->training = training;
  data->loss_fn = loss_fn;
  data->loss_scale = options.scale_grads ? 1.0f / static_cast<float>(n_microbatches) : 1.0f;
  data->microbatch_inputs =
      split_into_microbatches(inputs, n_microbatches, options.args_chunk_spec);
  for (int mb = 0; mb < n_microbatches; ++mb)
    stages[0]->validate_inputs(mb, data->microbatch_inputs[mb]);
  if (step_options.target.defined()) {
    const Tensor& target = step_options.target;
    if (options.args_chunk_spec.empty() && !inputs.empty() && inputs[0].defined() &&
        inputs[0].dim() > 0 && (target.dim() == 0 || target.size(0) != inputs[0].size(0)))
      throw std::invalid_argument(
          name + ".step: the target's batch (" +
          (target.dim() == 0 ? std::string("a scalar") : std::to_string(target.size(0))) +
          " rows) differs from the input's (" + std::to_string(inputs[0].size(0)) +
          " rows); both are split into microbatches along dim 0");
    for (auto& chunk : split_into_microbatches({target}, n_microbatches))
      data->targets.push_back(chunk[0]);
  }

  std::vector<PipelineStage*> local = stage_pointers(stages);
  TiedGradients tied;
  if (training) tied = begin_tied_step(local);

  caf::scoped_actor self{detail::process_actor_system()};
  // Last rank first: every rank has its step before any neighbour can notify it.
  for (auto it = actors.rbegin(); it != actors.rend(); ++it)
    self->send(*it, detail::step_atom::value, data->step, detail::StepHandle(data));

  int done = 0;
  std::string failure;
  bool timed_out = false;
  auto deadline = std::chrono::steady_clock::now() + options.step_timeout;
  while (done < ranks && failure.empty() && !timed_out) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
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
          if (step == data->step) failure = "rank " + std::to_string(rank) + " failed: " + what;
        },
        caf::after(left) >> [&] { timed_out = true; });
  }
  if (timed_out) {
    failure = name + ": step " + std::to_string(data->step) + " did not finish within " +
              std::to_string(options.step_timeout.count()) + " ms;";
    for (size_t r = 0; r < actors.size(); ++r) {
      self->request(actors[r], std::chrono::seconds(5), detail::status_atom::value)
          .receive([&](const std::string& s) { failure += " [" + s + "]"; },
                   [&](const caf::error&) {
                     failure += " [rank " + std::to_string(r) + " did not answer within 5 s]";
                   });
    }
  }
  // Quiesce the ranks before summing tied gradients: on a failure or timeout, others may still
  // be in a backward that writes those gradients.
  if (!failure.empty()) abort_all(self);
  if (training) finish_tied_step(local, std::move(tied));
  if (!failure.empty()) {
    throw PipelineError(failure +
                        " (gradients of this step are partial: zero_grad before "
                        "retrying)");
  }
  if (step_options.losses) {
    step_options.losses->clear();
    for (const Tensor& l : data->losses) step_options.losses->push_back(l);
  }
  if (data->outputs.empty() || !data->outputs[0].defined()) return Tensor();
  if (data->outputs[0].dim() == 0) {  // one scalar per microbatch (a model returning its loss)
    std::vector<Tensor> rows;
    for (const Tensor& t : data->outputs) rows.push_back(t.reshape({1}));
    return merge_chunks(rows);
  }
  return merge_chunks(data->outputs);
}

Tensor PipelineSchedule::step(const std::vector<Tensor>& inputs, const StepOptions& options) {
  return impl_->run_step(inputs, options, true);
}

Tensor PipelineSchedule::eval(const std::vector<Tensor>& inputs, const StepOptions& options) {
  return impl_->run_step(inputs, options, false);
}

const schedules::PipelineOrder& PipelineSchedule::order() const { return impl_->order; }
schedules::ScheduleKind PipelineSchedule::kind() const { return impl_->kind; }
int PipelineSchedule::num_microbatches() const { return impl_->n_microbatches; }
int PipelineSchedule::num_ranks() const { return impl_->ranks; }
const std::vector<std::shared_ptr<PipelineStage>>& PipelineSchedule::stages() const {
  return impl_->stages;
}

}  // namespace tensorplay::pipelining
