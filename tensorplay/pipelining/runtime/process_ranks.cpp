// The multi-process rank runtime: the construction meeting (every rank's facts gathered, checked
// alike in schedule_agreement.cpp), the transport chosen and registered, the stage actors
// exchanged, and a failure before a step told to the other ranks.
#include "tensorplay/pipelining/runtime/detail/process_ranks.h"

#include <algorithm>
#include <caf/all.hpp>
#include <string>

#include "tensorplay/distributed/detail/group_backend.h"
#include "tensorplay/distributed/detail/group_runtime.h"
#include "tensorplay/observe/message_log.h"
#include "tensorplay/pipelining/runtime/detail/local_messages.h"
#include "tensorplay/pipelining/runtime/detail/stage_actor.h"
#include "tensorplay/transport/nccl_channel.h"

namespace tensorplay::pipelining::detail {

ProcessRanks::ProcessRanks(std::shared_ptr<distributed::detail::GroupRuntime> runtime,
                           const ScheduleSpec& spec, std::vector<int> group_ranks,
                           const RemoteError& local_error)
    : ActorRanks(spec, runtime->system()),
      runtime_(std::move(runtime)),
      group_ranks_(std::move(group_ranks)) {
  const std::string name = spec.name();
  auto me = std::find(group_ranks_.begin(), group_ranks_.end(), runtime_->env().rank);
  if (me == group_ranks_.end())
    throw std::invalid_argument(name + ": rank " + std::to_string(runtime_->env().rank) +
                                " built stages for a process group it is not a member of");
  my_rank_ = static_cast<int>(me - group_ranks_.begin());
  // NCCL carries the tensors when every rank's stages are on a GPU and NCCL is usable there, for
  // schedules of one stage per rank: there each communicator (one per direction) carries
  // traffic one way between two ranks. Looped and V placements send both ways between a pair
  // within one direction, where two large sends issued before their receives would wait on
  // each other; they stage device tensors through host memory over UCX instead.
  bool wants_nccl = wants_nccl_for(*runtime_, spec.local_devices()) &&
                    schedules::is_single_stage_per_rank(spec.kind);
  std::vector<RankFacts> facts = meet(local_error, wants_nccl);
  bool all_nccl = true;
  for (const RankFacts& f : facts) all_nccl = all_nccl && f.wants_nccl;
  std::vector<int> stage_to_peer(spec.placement.num_stages);
  int self_peer = choose_channel(all_nccl, stage_to_peer);
  spawn_actors(std::move(stage_to_peer), self_peer);
  exchange_actors();
}

std::string ProcessRanks::describe_rank(int rank) const {
  int global =
      rank >= 0 && rank < static_cast<int>(group_ranks_.size()) ? group_ranks_[rank] : rank;
  return runtime_->describe(global);
}

int ProcessRanks::choose_channel(bool all_nccl, std::vector<int>& stage_to_peer) {
  const StagePlacement& p = spec_.placement;
  if (!all_nccl) {
    // UCX between host buffers; device tensors are staged through host memory.
    channel_ = runtime_->ucx();
    for (int s = 0; s < p.num_stages; ++s) stage_to_peer[s] = group_ranks_[p.stage_to_rank[s]];
    return runtime_->env().rank;
  }
  // NCCL's peers are ranks of a communicator over this group; group rank 0 makes its ids.
  std::vector<std::vector<uint8_t>> ids = agree_nccl_ids(
      *runtime_, group_ranks_, my_rank_, transport::kLanes, spec_.name() + " NCCL ids");
  channel_ = std::make_shared<transport::NcclChannel>(my_rank_, p.ranks, spec_.stages[0]->device(),
                                                      ids, runtime_->timeout());
  for (int s = 0; s < p.num_stages; ++s) stage_to_peer[s] = p.stage_to_rank[s];
  return my_rank_;
}

void ProcessRanks::spawn_actors(std::vector<int> stage_to_peer, int self_peer) {
  auto worker = spec_.make_worker(my_rank_, channel_, std::move(stage_to_peer), self_peer);
  caf::actor_system& system = system_;
  StageActorHandle mine = spawn_stage_actor(system, worker, spec_.placement.stage_to_rank,
                                            runtime_->inbox(), spec_.stages_handle());
  local_actors_ = {mine};
  local_workers_ = {worker};
  // Notifications ride the data channel where it carries messages (UCX): one hop from the
  // sender's progress thread to the receiver's, which posts the receive at once; the actor hears
  // of the tensors when they are here. Registered before the actor exchange, so no rank sends
  // before every rank listens.
  stream_ = runtime_->next_stream(group_ranks_);
  worker->set_stream(stream_, true);
  if (channel_->carries_messages()) {
    messages_registered_ = true;
    channel_->set_message_handler(stream_, [worker, mine](int peer, std::string_view bytes) {
      deliver_notification(*worker, mine, peer, bytes);
    });
  }
  my_status_ = spawn_status_actor(system, worker, mine);
}

void ProcessRanks::exchange_actors() {
  const std::string name = spec_.name();
  const StageActorHandle mine = local_actors_.front();
  try {
    // Handles cross processes untyped (CAF's actor handles in a contribution); each rank's are
    // its stage actor's and its status actor's, typed again here.
    auto handles = runtime_->exchange(
        group_ranks_, {},
        {caf::actor_cast<caf::actor>(mine), caf::actor_cast<caf::actor>(my_status_)},
        name + " actor exchange");
    for (auto& c : handles) {
      if (c.actors.size() != 2)
        throw std::runtime_error(name + ": a rank sent " + std::to_string(c.actors.size()) +
                                 " actor handles at the actor exchange, expected 2 (are all "
                                 "ranks running the same tensorplay version?)");
      actors_.push_back(caf::actor_cast<StageActorHandle>(c.actors[0]));
      status_actors_.push_back(caf::actor_cast<StatusActorHandle>(c.actors[1]));
    }
  } catch (...) {
    stop(std::chrono::milliseconds(0));
    throw;
  }
  std::vector<std::string> names;
  std::vector<caf::actor> peers;
  for (int r = 0; r < static_cast<int>(actors_.size()); ++r) {
    names.push_back(describe_rank(r));
    peers.push_back(caf::actor_cast<caf::actor>(actors_[r]));
  }
  caf::anon_send(mine, peers_atom::value, std::move(peers), std::move(names));
}

void ProcessRanks::fail_step_everywhere(uint64_t step, const std::string& what) {
  for (int r = 0; r < static_cast<int>(actors_.size()); ++r)
    if (r != my_rank_)
      caf::send_as(local_actors_.front(), actors_[r], peer_failed_atom::value, step,
                   static_cast<int32_t>(my_rank_), what);
}

void ProcessRanks::detach() {
  if (messages_registered_) channel_->set_message_handler(stream_, nullptr);
  messages_registered_ = false;
}

ProcessRanks::~ProcessRanks() { detach(); }

std::unique_ptr<RankRuntime> make_process_ranks(const ScheduleSpec& spec,
                                                const std::vector<int>& group_ranks,
                                                const RemoteError& local_error) {
  auto runtime = distributed::detail::shared_runtime_of(spec.stages.front()->get_mesh());
  if (!runtime)
    throw std::invalid_argument(
        spec.name() +
        ": the stages were placed across processes but this process has "
        "joined no job; call tensorplay::distributed::init_process_group()");
  runtime->check_open(spec.name());
  return std::make_unique<ProcessRanks>(std::move(runtime), spec, group_ranks, local_error);
}

}  // namespace tensorplay::pipelining::detail
