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

namespace {

/// Opens a rank's contribution to the construction meeting when it cannot build its share.
constexpr const char* kLocalError = "error: ";

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
  std::shared_ptr<transport::Channel> channel;
  std::vector<caf::actor>
      actors;  ///< by rank (proxies of other processes' actors when distributed)
  std::vector<caf::actor> local_actors;   ///< the actors of this process
  std::vector<caf::actor> status_actors;  ///< by rank: answer status requests, never busy
  std::vector<std::shared_ptr<StageWorker>> local_workers;
  /// One step at a time: a second caller fails at once instead of queueing behind the first.
  std::atomic<bool> stepping{false};
  /// The last step that failed, and which local ranks had not dropped it when the caller got
  /// its error (stuck in compute): a later step waits for none of them, it fails at once.
  uint64_t last_failed_step = 0;
  std::vector<PipelineStage*> claimed;  ///< stages this schedule owns (released at the end)

  ~Impl() {
    for (PipelineStage* s : claimed) s->release(this);
  }
  uint64_t next_step = 1;
  // Across processes: the group (global ranks, by schedule rank) and this process's rank in it.
  bool distributed = false;
  std::vector<int> group_ranks;
  int my_rank = 0;
  std::map<std::string, distributed::ProcessGroup> tie_groups;  // ties spanning processes
  CustomFunction overlap_fb;         ///< register_custom_function(OverlapFB, ...)
  uint32_t stream = 0;               ///< this schedule's traffic on a shared channel
  bool messages_registered = false;  ///< the channel routes `stream`'s messages to us

  /// The policy rank `rank` trains with: the options' factory, or the order.
  std::unique_ptr<schedules::SchedulePolicy> training_policy(int rank) const {
    return schedules::make_policy(
        options.policy, schedules::policy_context(rank, order, stage_to_rank, n_microbatches));
  }
  /// Whether the stages are all of the pipeline, or this process's share of a process group's.
  void find_group();
  void check_stages();
  /// The checks of this process's share: stages, placement, order, parameters.
  void check_local();
  void setup_embedded();
  /// Meets the other ranks; `local_error` (when not empty) is this rank's reason to fail, which
  /// every rank then reports.
  void setup_distributed(const std::string& local_error);
  void check_agreement(const std::vector<std::string>& infos);
  std::string describe_rank(int rank) const;
  /// Tells the other ranks this process's step `step` failed before it started.
  void fail_step_everywhere(uint64_t step, const std::string& what);
  StepOutput run_step(const std::vector<Tensor>& inputs, const nn::TensorDict& kwargs,
                      const StepOptions& step_options, bool training);
  /// Tells this process's ranks to drop step `step`, waits for them until `deadline`, and
  /// returns what each rank that did not answer in time is still doing.
  std::vector<std::string> abort_all(uint64_t step, std::chrono::steady_clock::time_point deadline);
  /// Asks every rank what it waits for, all at once, and returns the answers by the deadline.
  std::string collect_status(caf::scoped_actor& self,
                             std::chrono::steady_clock::time_point deadline);
  /// Throws when a rank of this process is still computing an earlier failed step.
  void check_not_stuck(const std::string& name);
  /// The keep-alive handle for the stage actors: the stages they compute on.
  std::shared_ptr<const void> stages_handle() const {
    return std::make_shared<std::vector<std::shared_ptr<PipelineStage>>>(stages);
  }
};

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
    local_error = e.what();
  }
  if (im.distributed)
    im.setup_distributed(local_error);
  else
    im.setup_embedded();
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
  for (int r = 0; r < ranks; ++r) {
    std::vector<PipelineStage*> local;
    for (const auto& s : stages)
      if (stage_to_rank[s->stage_index()] == r) local.push_back(s.get());
    auto worker =
        std::make_shared<StageWorker>(r, local, num_stages, n_microbatches, training_policy(r),
                                      schedules::make_static_order_policy(forward_only(order[r])),
                                      channel, options.transfer_timeout);
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

std::string PipelineSchedule::Impl::describe_rank(int rank) const {
  if (!distributed) return "rank " + std::to_string(rank);
  auto* cluster = distributed::detail::Cluster::current();
  int global = rank >= 0 && rank < static_cast<int>(group_ranks.size()) ? group_ranks[rank] : rank;
  return cluster ? cluster->describe(global) : "rank " + std::to_string(global);
}

void PipelineSchedule::Impl::check_agreement(const std::vector<std::string>& infos) {
  // Every rank runs these checks on the same gathered facts, so all fail alike, none hangs.
  std::string name(schedules::schedule_name(kind));
  // A rank that could not build its share says why; every rank reports the first such rank.
  for (size_t r = 0; r < infos.size(); ++r)
    if (infos[r].rfind(kLocalError, 0) == 0)
      throw std::invalid_argument(describe_rank(static_cast<int>(r)) + ": " +
                                  infos[r].substr(std::string_view(kLocalError).size()));
  std::map<int, int> built_on;  // stage -> rank
  // Each rank is compared with rank 0, so every rank words a disagreement the same way.
  struct Info {
    std::string kind;
    int n = 0, stages = 0, spr = 0, count = 0;
  };
  std::vector<std::istringstream> ins;
  std::vector<Info> parsed(infos.size());
  for (size_t r = 0; r < infos.size(); ++r) {
    ins.emplace_back(infos[r]);
    ins[r] >> parsed[r].kind >> parsed[r].n >> parsed[r].stages >> parsed[r].spr >> parsed[r].count;
  }
  const Info& root = parsed.at(0);
  std::string root_who = describe_rank(0);
  for (size_t r = 0; r < infos.size(); ++r) {
    std::istringstream& in = ins[r];
    const Info& o = parsed[r];
    std::string who = describe_rank(static_cast<int>(r));
    if (o.kind != root.kind)
      throw std::invalid_argument(name + ": " + who + " runs " + o.kind + ", " + root_who +
                                  " runs " + root.kind +
                                  "; every rank must construct the same schedule");
    if (o.n != root.n)
      throw std::invalid_argument(name + ": ranks disagree on n_microbatches: " + root_who +
                                  " has " + std::to_string(root.n) + ", " + who + " has " +
                                  std::to_string(o.n));
    if (o.stages != root.stages)
      throw std::invalid_argument(name + ": ranks disagree on the stage count: " + root_who +
                                  " has " + std::to_string(root.stages) + ", " + who + " has " +
                                  std::to_string(o.stages));
    if (o.spr != root.spr)
      throw std::invalid_argument(name + ": ranks disagree on stages_per_rank: " + root_who +
                                  " has " + std::to_string(root.spr) + ", " + who + " has " +
                                  std::to_string(o.spr));
    const int count = o.count;
    for (int i = 0; i < count; ++i) {
      int stage = -1;
      in >> stage;
      auto [it, fresh] = built_on.emplace(stage, static_cast<int>(r));
      if (!fresh)
        throw std::invalid_argument(name + ": stage " + std::to_string(stage) + " is built on " +
                                    describe_rank(it->second) + " and on " + who +
                                    "; each stage belongs to exactly one rank");
    }
  }
  if (static_cast<int>(group_ranks.size()) != ranks)
    throw std::invalid_argument(
        name + ": " + std::to_string(num_stages) + " stages at " + std::to_string(stages_per_rank) +
        " per rank need " + std::to_string(ranks) + " ranks, but the process group has " +
        std::to_string(group_ranks.size()) + " (WORLD_SIZE or the group passed to build_stage)");
  for (int s = 0; s < num_stages; ++s) {
    auto it = built_on.find(s);
    if (it == built_on.end())
      throw std::invalid_argument(name + ": stage " + std::to_string(s) +
                                  " is built on no rank (it belongs on " +
                                  describe_rank(stage_to_rank[s]) + ")");
    if (it->second != stage_to_rank[s])
      throw std::invalid_argument(name + ": " + describe_rank(it->second) + " built stage " +
                                  std::to_string(s) + ", which " + name + " places on " +
                                  describe_rank(stage_to_rank[s]) + " (see stages_of_rank)");
  }
}

void PipelineSchedule::Impl::setup_distributed(const std::string& local_error) {
  auto* cluster = distributed::detail::Cluster::current();
  std::string name(schedules::schedule_name(kind));
  auto me = std::find(group_ranks.begin(), group_ranks.end(), cluster->env.rank);
  if (me == group_ranks.end())
    throw std::invalid_argument(name + ": rank " + std::to_string(cluster->env.rank) +
                                " built stages for a process group it is not a member of");
  my_rank = static_cast<int>(me - group_ranks.begin());

  std::ostringstream info;
  // NCCL carries the tensors when every rank's stages are on a GPU and NCCL is usable there, for
  // schedules of one stage per rank: there each communicator (one per direction) carries
  // traffic one way between two ranks. Looped and V placements send both ways between a pair
  // within one direction, where two large sends issued before their receives would wait on
  // each other; they stage device tensors through host memory over UCX instead.
  bool wants_nccl = cluster->backend == "nccl" && transport::nccl_available() &&
                    schedules::is_single_stage_per_rank(kind);
  for (const auto& s : stages) wants_nccl = wants_nccl && s->device().is_cuda();
  if (!local_error.empty()) {
    info << kLocalError << local_error;
  } else {
    info << name << ' ' << n_microbatches << ' ' << num_stages << ' ' << stages_per_rank << ' '
         << stages.size();
    for (const auto& s : stages) info << ' ' << s->stage_index();
    info << ' ' << (wants_nccl ? 1 : 0);
  }
  auto got = cluster->exchange(group_ranks, info.str(), {}, name + " construction");
  std::vector<std::string> infos;
  for (auto& c : got) infos.push_back(std::move(c.bytes));
  check_agreement(infos);

  bool all_nccl = true;
  for (const std::string& i : infos) all_nccl = all_nccl && i.back() == '1';
  std::vector<int> stage_to_peer(num_stages);
  int self_peer = cluster->env.rank;
  if (all_nccl) {
    // NCCL's peers are ranks of a communicator over this group; group rank 0 makes its ids.
    std::string ids;
    if (my_rank == 0) {
      for (int i = 0; i < 2; ++i) {
        std::vector<uint8_t> id = transport::nccl_unique_id();
        ids.append(reinterpret_cast<const char*>(id.data()), id.size());
      }
    }
    std::string got_ids = cluster->exchange(group_ranks, ids, {}, name + " NCCL ids")[0].bytes;
    size_t half = got_ids.size() / 2;
    std::vector<std::vector<uint8_t>> id_list = {
        std::vector<uint8_t>(got_ids.begin(), got_ids.begin() + half),
        std::vector<uint8_t>(got_ids.begin() + half, got_ids.end())};
    channel = std::make_shared<transport::NcclChannel>(my_rank, ranks, stages[0]->device(), id_list,
                                                       cluster->timeout);
    for (int s = 0; s < num_stages; ++s) stage_to_peer[s] = stage_to_rank[s];
    self_peer = my_rank;
  } else {
    // UCX between host buffers; device tensors are staged through host memory.
    channel = cluster->ucx;
    for (int s = 0; s < num_stages; ++s) stage_to_peer[s] = group_ranks[stage_to_rank[s]];
  }
  std::vector<PipelineStage*> local = stage_pointers(stages);
  auto worker = std::make_shared<StageWorker>(
      my_rank, local, num_stages, n_microbatches, training_policy(my_rank),
      schedules::make_static_order_policy(forward_only(order[my_rank])), channel,
      options.transfer_timeout, stage_to_peer, self_peer);
  caf::actor_system& system = detail::process_actor_system();
  caf::actor mine = detail::spawn_stage_actor(system, worker, stage_to_rank, true, stages_handle());
  caf::actor my_status = detail::spawn_status_actor(system, worker, mine);
  local_actors = {mine};
  local_workers = {worker};
  // Notifications ride the data channel where it carries messages (UCX): one hop from the
  // sender's progress thread to the receiver's, which posts the receive at once; the actor hears
  // of the tensors when they are here. Registered before the actor exchange below, so no rank
  // sends before every rank listens.
  stream = cluster->next_stream(group_ranks);
  worker->set_stream(stream, true);
  if (channel->carries_messages()) {
    messages_registered = true;
    const int rank_for_log = my_rank;
    channel->set_message_handler(
        stream, [worker, mine, rank_for_log](int /*peer*/, std::string_view bytes) {
          Notification n;
          if (std::string error = decode_notification(bytes, n); !error.empty()) {
            note_rejected_message(rank_for_log, "malformed notification: " + error);
            return;
          }
          if (std::string error = worker->check_notification(n); !error.empty()) {
            note_rejected_message(rank_for_log, "notification " + error);
            return;
          }
          if (message_log_enabled()) log_event(rank_for_log, n.step, "recv", describe(n));
          auto tell = [mine](const Notification& done) {
            caf::anon_send(mine, detail::received_atom::value, done.step,
                           static_cast<int32_t>(done.stage), static_cast<int32_t>(done.direction),
                           static_cast<int32_t>(done.microbatch));
          };
          try {
            if (worker->post_receive(n, tell)) tell(n);
          } catch (const std::exception& e) {
            worker->fail_arrival(n, e.what());
            tell(n);
          }
        });
  }
  try {
    auto handles = cluster->exchange(group_ranks, {}, {mine, my_status}, name + " actor exchange");
    for (auto& c : handles) {
      if (c.actors.size() != 2)
        throw std::runtime_error(name + ": a rank sent " + std::to_string(c.actors.size()) +
                                 " actor handles at the actor exchange, expected 2 (are all "
                                 "ranks running the same tensorplay version?)");
      actors.push_back(c.actors[0]);
      status_actors.push_back(c.actors[1]);
    }
  } catch (...) {
    if (messages_registered) channel->set_message_handler(stream, nullptr);
    caf::anon_send_exit(mine, caf::exit_reason::user_shutdown);
    throw;
  }
  std::vector<std::string> names;
  for (int r = 0; r < static_cast<int>(actors.size()); ++r) names.push_back(describe_rank(r));
  caf::anon_send(mine, detail::peers_atom::value, actors, std::move(names));

  // Tied parameters whose copies live in several processes: one group per tie, of exactly the
  // ranks holding a copy.
  for (const auto& s : stages)
    for (const auto& [tie, tie_stages] : s->tied_parameters()) {
      std::set<int> holders;
      for (int t : tie_stages) holders.insert(group_ranks.at(stage_to_rank.at(t)));
      if (holders.size() > 1)
        tie_groups.emplace(tie, distributed::new_group({holders.begin(), holders.end()}));
    }
}

void PipelineSchedule::Impl::fail_step_everywhere(uint64_t step, const std::string& what) {
  if (!distributed) return;
  for (int r = 0; r < static_cast<int>(actors.size()); ++r)
    if (r != my_rank)
      caf::send_as(local_actors.front(), actors[r], detail::peer_failed_atom::value, step,
                   static_cast<int32_t>(my_rank), what);
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

std::string PipelineSchedule::Impl::collect_status(caf::scoped_actor& self,
                                                   std::chrono::steady_clock::time_point deadline) {
  // All requests go out at once; each answer is awaited until the common deadline.
  auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                           deadline - std::chrono::steady_clock::now()),
                       std::chrono::milliseconds(1));
  std::vector<std::string> answers(status_actors.size());
  using Handle = decltype(self->request<caf::message_priority::high>(status_actors[0], left,
                                                                     detail::status_atom::value));
  std::vector<Handle> pending;
  for (const caf::actor& a : status_actors)
    pending.push_back(
        self->request<caf::message_priority::high>(a, left, detail::status_atom::value));
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
    throw;
  }

  std::vector<PipelineStage*> local = stage_pointers(stages);
  TiedGradients tied;
  if (training) tied = begin_tied_step(local);

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
    failure += collect_status(self, std::chrono::steady_clock::now() + wind_down);
  }
  std::vector<std::string> stuck;
  if (!failure.empty()) {
    // Quiesce the ranks before summing tied gradients: on a failure or timeout, others may
    // still be in a backward that writes those gradients. A rank stuck in compute is not
    // waited for: the next step refuses to start until it has returned.
    stuck = abort_all(data->step, std::chrono::steady_clock::now() + wind_down);
    last_failed_step = data->step;
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
