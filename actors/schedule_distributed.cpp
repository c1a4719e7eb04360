// Schedules across processes: the construction meeting (every rank's facts gathered and checked
// alike), the transport chosen and registered, the stage actors exchanged, and a failure before a
// step told to the other ranks.
#include <caf/all.hpp>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "actors/detail/caf_messages.h"
#include "actors/detail/caf_system.h"
#include "actors/detail/cluster.h"
#include "actors/detail/remote_error.h"
#include "actors/detail/schedule_impl.h"
#include "actors/detail/stage_actor.h"
#include "actors/detail/wire_note.h"
#include "actors/message_log.h"
#include "schedules/policy.h"
#include "stages/tied_parameters.h"
#include "transport/nccl_channel.h"

namespace tensorplay::pipelining {

using detail::kLocalError;
using schedules::Action;
using schedules::ActionKind;

std::string PipelineSchedule::Impl::describe_rank(int rank) const {
  if (!distributed) return "rank " + std::to_string(rank);
  auto* cluster = distributed::detail::Cluster::current();
  int global = rank >= 0 && rank < static_cast<int>(group_ranks.size()) ? group_ranks[rank] : rank;
  return cluster ? cluster->describe(global) : "rank " + std::to_string(global);
}

void PipelineSchedule::Impl::check_agreement(const std::vector<std::string>& infos) {
  // Every rank runs these checks on the same gathered facts, so all fail alike, none hangs.
  std::string name(schedules::schedule_name(kind));
  // A rank that could not build its share says why; every rank reports the first such rank,
  // with the type of its error.
  for (size_t r = 0; r < infos.size(); ++r)
    if (infos[r].rfind(kLocalError, 0) == 0)
      detail::throw_remote_error(
          describe_rank(static_cast<int>(r)),
          std::string_view(infos[r]).substr(std::string_view(kLocalError).size()));
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
  // A transfer's tag names its receiving stage in 12 bits, the last value kept for collectives:
  // stages 0 to kCollectiveStage - 1 fit.
  if (num_stages > transport::kCollectiveStage)
    throw std::invalid_argument(
        name + ": " + std::to_string(num_stages) +
        " stages; a schedule across processes holds at most " +
        std::to_string(transport::kCollectiveStage) + " (transfer tags number stages 0 to " +
        std::to_string(transport::kCollectiveStage - 1) + "; the next one tags collectives)");
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

}  // namespace tensorplay::pipelining
