// The embedded runtime: one stage actor (and status actor) per rank, all in this process, over an
// in-process channel.
#include "tensorplay/pipelining/runtime/detail/actor_ranks.h"
#include "tensorplay/pipelining/runtime/detail/local_messages.h"
#include "tensorplay/pipelining/runtime/detail/stage_actor.h"
#include "tensorplay/transport/local_channel.h"
#include "tensorplay/wire/detail/caf_system.h"

namespace tensorplay::pipelining::detail {

namespace {

class EmbeddedRanks : public ActorRanks {
 public:
  explicit EmbeddedRanks(const ScheduleSpec& spec) : ActorRanks(spec, process_actor_system()) {
    caf::actor_system& system = system_;
    // Every rank's actor computes at once here: each stage takes its share of the cores.
    for (const auto& s : spec.stages) s->set_concurrent_threads(spec.placement.ranks);
    for (int r = 0; r < spec.placement.ranks; ++r) {
      auto worker = spec.make_worker(r, channel_);
      actors_.push_back(spawn_stage_actor(system, worker, spec.placement.stage_to_rank, nullptr,
                                          spec.stages_handle()));
      status_actors_.push_back(spawn_status_actor(system, worker, actors_.back()));
      local_workers_.push_back(worker);
    }
    local_actors_ = actors_;
    caf::scoped_actor self{system};
    std::vector<caf::actor> peers;
    for (const StageActorHandle& a : actors_) peers.push_back(caf::actor_cast<caf::actor>(a));
    for (const StageActorHandle& a : actors_)
      self->send(a, peers_atom::value, peers, std::vector<std::string>{});
  }

  bool distributed() const override { return false; }
  std::string describe_rank(int rank) const override { return "rank " + std::to_string(rank); }
  void fail_step_everywhere(uint64_t, const std::string&) override {}

 protected:
  void cancel_transfers() override { channel_->cancel_all(); }

 private:
  std::shared_ptr<transport::Channel> channel_ = std::make_shared<transport::LocalChannel>();
};

}  // namespace

std::unique_ptr<RankRuntime> make_embedded_ranks(const ScheduleSpec& spec) {
  return std::make_unique<EmbeddedRanks>(spec);
}

}  // namespace tensorplay::pipelining::detail
