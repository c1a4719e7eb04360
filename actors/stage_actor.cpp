// Stage actor behaviour. Pending work lives in the worker's ready set (not in the mailbox): every
// message is accepted at once and the policy picks from what is ready.
#include "actors/detail/stage_actor.h"

#include <exception>
#include <string>

#include "actors/detail/caf_messages.h"
#include "actors/message_log.h"

namespace tensorplay::pipelining::detail {
namespace {

struct StageActorState {
  std::shared_ptr<StageWorker> worker;
  std::vector<int> stage_to_rank;
  std::vector<caf::actor> peers;
  caf::actor driver;
  uint64_t step = 0;
  bool failed = false;
};

using StageActor = caf::stateful_actor<StageActorState>;

void pump(StageActor* self) {
  auto& st = self->state;
  if (st.failed || !st.driver) return;
  try {
    st.worker->run_ready(
        [self](const Notification& n) {
          auto& s = self->state;
          const caf::actor& dest = s.peers.at(s.stage_to_rank.at(n.stage));
          bool fwd = n.direction == transport::Direction::Forward;
          log_event(s.worker->rank(), n.step, "send",
                    std::string(fwd ? "input " : "grad ") + std::to_string(n.stage) + ":" +
                        std::to_string(n.microbatch));
          if (fwd)
            self->send(dest, forward_atom::value, n.step, n.stage, n.microbatch);
          else
            self->send(dest, backward_atom::value, n.step, n.stage, n.microbatch);
        },
        [self](const char* event, const schedules::Action& action) {
          log_event(self->state.worker->rank(), self->state.step, event, to_string(action));
        });
    if (st.worker->finished()) {
      self->send(st.driver, done_atom::value, st.step, st.worker->rank());
      st.driver = nullptr;
    }
  } catch (const std::exception& e) {
    st.failed = true;
    self->send(st.driver, failed_atom::value, st.step, st.worker->rank(), std::string(e.what()));
  }
}

void notify(StageActor* self, uint64_t step, int stage, int mb, transport::Direction dir) {
  auto& st = self->state;
  log_event(st.worker->rank(), step, "recv",
            std::string(dir == transport::Direction::Forward ? "input " : "grad ") +
                std::to_string(stage) + ":" + std::to_string(mb));
  st.worker->on_notification({step, stage, dir, mb});
  pump(self);
}

caf::behavior stage_actor(StageActor* self, std::shared_ptr<StageWorker> worker,
                          std::vector<int> stage_to_rank) {
  self->state.worker = std::move(worker);
  self->state.stage_to_rank = std::move(stage_to_rank);
  return {
      [self](peers_atom, std::vector<caf::actor> peers) { self->state.peers = std::move(peers); },
      [self](step_atom, uint64_t step, StepHandle data) {
        auto& st = self->state;
        st.driver = caf::actor_cast<caf::actor>(self->current_sender());
        st.step = step;
        st.failed = false;
        log_event(st.worker->rank(), step, "recv", "step");
        st.worker->begin_step(std::move(data));
        pump(self);
      },
      [self](forward_atom, uint64_t step, int stage, int mb) {
        notify(self, step, stage, mb, transport::Direction::Forward);
      },
      [self](backward_atom, uint64_t step, int stage, int mb) {
        notify(self, step, stage, mb, transport::Direction::Backward);
      },
      [self](abort_atom) -> bool {
        self->state.worker->abort_step();
        self->state.driver = nullptr;
        return true;
      },
      [self](status_atom) -> std::string { return self->state.worker->describe_wait(); },
  };
}

}  // namespace

caf::actor spawn_stage_actor(caf::actor_system& system, std::shared_ptr<StageWorker> worker,
                             std::vector<int> stage_to_rank) {
  return system.spawn<caf::detached>(stage_actor, std::move(worker), std::move(stage_to_rank));
}

}  // namespace tensorplay::pipelining::detail
