// Schedules across processes: the construction meeting (every rank's facts gathered, checked alike
// in schedule_agreement.cpp), the transport chosen and registered, the stage actors exchanged, a
// neighbour's mismatched tensors routed to the stage actor, and a failure before a step told to
// the other ranks.
#include <caf/all.hpp>
#include <cstdio>
#include <set>
#include <string>

#include "actors/detail/caf_messages.h"
#include "actors/detail/caf_system.h"
#include "actors/detail/cluster.h"
#include "actors/detail/schedule_impl.h"
#include "actors/detail/stage_actor.h"
#include "actors/detail/wire_note.h"
#include "actors/message_log.h"
#include "schedules/policy.h"
#include "stages/tied_parameters.h"
#include "transport/nccl_channel.h"

namespace tensorplay::pipelining {

using schedules::Action;
using schedules::ActionKind;

std::string PipelineSchedule::Impl::describe_rank(int rank) const {
  if (!distributed) return "rank " + std::to_string(rank);
  auto* cluster = distributed::detail::Cluster::current();
  int global = rank >= 0 && rank < static_cast<int>(group_ranks.size()) ? group_ranks[rank] : rank;
  return cluster ? cluster->describe(global) : "rank " + std::to_string(global);
}

namespace {

/// A notification that came on the channel (its thread) for the stage actor `actor` of schedule
/// rank `rank`, from channel peer `peer`: decoded, checked, and its receive posted. A rejected one
/// is counted; a neighbour's mismatched tensors are kept for the actor, which fails their step.
void on_notification(StageWorker& worker, const caf::actor& actor, int rank, int peer,
                     std::string_view bytes) {
  Notification n;
  if (std::string error = decode_notification(bytes, n); !error.empty()) {
    note_rejected_message(rank, "malformed notification: " + error);
    return;
  }
  if (NotificationCheck check = worker.check_notification(n); !check.accepted()) {
    note_rejected_message(rank, "notification " + check.error);
    // From the neighbour's rank, for a step of this schedule: the step cannot succeed.
    if (!check.mismatch.empty() && peer == n.source &&
        worker.keep_rejection(n, std::move(check.mismatch)))
      caf::anon_send(actor, detail::rejected_atom::value);
    return;
  }
  if (message_log_enabled()) log_event(rank, n.step, "recv", describe(n));
  auto tell = [actor](const Notification& done) {
    caf::anon_send(actor, detail::received_atom::value, done.step, static_cast<int32_t>(done.stage),
                   static_cast<int32_t>(done.direction), static_cast<int32_t>(done.microbatch));
  };
  try {
    if (worker.post_receive(n, tell)) tell(n);
  } catch (const std::exception& e) {
    worker.fail_arrival(n, e.what());
    tell(n);
  }
}

}  // namespace

void PipelineSchedule::Impl::setup_distributed(const std::string& local_error) {
  auto* cluster = distributed::detail::Cluster::current();
  std::string name(schedules::schedule_name(kind));
  auto me = std::find(group_ranks.begin(), group_ranks.end(), cluster->env.rank);
  if (me == group_ranks.end())
    throw std::invalid_argument(name + ": rank " + std::to_string(cluster->env.rank) +
                                " built stages for a process group it is not a member of");
  my_rank = static_cast<int>(me - group_ranks.begin());

  // NCCL carries the tensors when every rank's stages are on a GPU and NCCL is usable there, for
  // schedules of one stage per rank: there each communicator (one per direction) carries
  // traffic one way between two ranks. Looped and V placements send both ways between a pair
  // within one direction, where two large sends issued before their receives would wait on
  // each other; they stage device tensors through host memory over UCX instead.
  bool wants_nccl = cluster->backend == "nccl" && transport::nccl_available() &&
                    schedules::is_single_stage_per_rank(kind);
  for (const auto& s : stages) wants_nccl = wants_nccl && s->device().is_cuda();
  std::vector<detail::RankFacts> facts = meet(local_error, wants_nccl);
  bool all_nccl = true;
  for (const detail::RankFacts& f : facts) all_nccl = all_nccl && f.wants_nccl;
  std::vector<int> stage_to_peer(num_stages);
  int self_peer = choose_channel(all_nccl, stage_to_peer);
  std::vector<PipelineStage*> local = stage_pointers(stages);
  auto worker = std::make_shared<StageWorker>(
      my_rank, local, num_stages, n_microbatches, training_policy(my_rank),
      schedules::make_static_order_policy(detail::forward_only(order[my_rank])), channel,
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
    channel->set_message_handler(stream,
                                 [worker, mine, rank = my_rank](int peer, std::string_view bytes) {
                                   on_notification(*worker, mine, rank, peer, bytes);
                                 });
  }
  exchange_actors(mine, my_status);

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

int PipelineSchedule::Impl::choose_channel(bool all_nccl, std::vector<int>& stage_to_peer) {
  auto* cluster = distributed::detail::Cluster::current();
  if (!all_nccl) {
    // UCX between host buffers; device tensors are staged through host memory.
    channel = cluster->ucx;
    for (int s = 0; s < num_stages; ++s) stage_to_peer[s] = group_ranks[stage_to_rank[s]];
    return cluster->env.rank;
  }
  // NCCL's peers are ranks of a communicator over this group; group rank 0 makes its ids.
  std::string ids;
  if (my_rank == 0) {
    for (int i = 0; i < transport::kLanes; ++i) {
      std::vector<uint8_t> id = transport::nccl_unique_id();
      ids.append(reinterpret_cast<const char*>(id.data()), id.size());
    }
  }
  const std::string name(schedules::schedule_name(kind));
  std::string got_ids = cluster->exchange(group_ranks, ids, {}, name + " NCCL ids")[0].bytes;
  size_t half = got_ids.size() / 2;
  std::vector<std::vector<uint8_t>> id_list = {
      std::vector<uint8_t>(got_ids.begin(), got_ids.begin() + half),
      std::vector<uint8_t>(got_ids.begin() + half, got_ids.end())};
  channel = std::make_shared<transport::NcclChannel>(my_rank, ranks, stages[0]->device(), id_list,
                                                     cluster->timeout);
  for (int s = 0; s < num_stages; ++s) stage_to_peer[s] = stage_to_rank[s];
  return my_rank;
}

void PipelineSchedule::Impl::exchange_actors(const caf::actor& mine, const caf::actor& my_status) {
  auto* cluster = distributed::detail::Cluster::current();
  const std::string name(schedules::schedule_name(kind));
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
}

void PipelineSchedule::Impl::fail_step_everywhere(uint64_t step, const std::string& what) {
  if (!distributed) return;
  for (int r = 0; r < static_cast<int>(actors.size()); ++r)
    if (r != my_rank)
      caf::send_as(local_actors.front(), actors[r], detail::peer_failed_atom::value, step,
                   static_cast<int32_t>(my_rank), what);
}

}  // namespace tensorplay::pipelining
