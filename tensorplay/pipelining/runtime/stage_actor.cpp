// Stage actor behaviour. Pending work lives in the worker's ready set (not in the mailbox): every
// message is accepted at once and the policy picks from what is ready. Receives are posted when a
// notification arrives and complete as messages, so no handler waits on the network.
#include "tensorplay/pipelining/runtime/detail/stage_actor.h"

#include <pthread.h>

#include <exception>
#include <map>
#include <optional>
#include <string>

#include "tensorplay/base/compute_activity.h"
#include "tensorplay/distributed/detail/group_runtime.h"
#include "tensorplay/observe/message_log.h"
#include "tensorplay/observe/thread_times.h"
#include "tensorplay/pipelining/runtime/detail/local_messages.h"
#include "tensorplay/pipelining/runtime/step_data.h"
#include "tensorplay/wire/protocol.h"

namespace tensorplay::pipelining::detail {
namespace {

struct StageActorState {
  std::shared_ptr<StageWorker> worker;
  std::vector<int> stage_to_rank;
  std::vector<StageActorHandle> peers;  // every rank's stage actor, by rank
  bool distributed = false;
  std::shared_ptr<distributed::detail::CollectiveInbox> members;  // null: every rank is here
  caf::actor driver;
  std::shared_ptr<StepTally> tally;  // this process's ranks yet to finish the step
  uint64_t step = 0;
  bool failed = false;
  bool resume_pending = false;  // a resume message is in the mailbox
  std::map<uint64_t, std::pair<int, std::string>> failed_elsewhere;  // step -> (rank, what)
  std::map<int, std::string> gone;           // ranks whose stage actor went down, and why
  std::vector<std::string> rank_names;       // "rank 3 (host)", by rank, for error messages
  std::map<uint64_t, std::string> rejected;  // step not begun -> why a neighbour's tensors failed
  std::shared_ptr<const void> keep_alive;
  bool named = false;                // its thread's name is set
  std::optional<StepScope> in_step;  // from the step's start to its end or failure
  ThreadTimes step_began;            // this actor's thread at the step's start (when the log is on)
};

using StageActor = StageActorHandle::stateful_base<StageActorState>;

/// Ends this rank's step with `what`: tells the driver, and (across processes) every other rank.
void fail(StageActor* self, const std::string& what, bool tell_peers) {
  auto& st = self->state;
  if (st.failed) return;
  st.failed = true;
  st.in_step.reset();
  if (st.driver) caf::anon_send(st.driver, failed_atom::value, st.step, st.worker->rank(), what);
  if (tell_peers && st.distributed)
    for (size_t r = 0; r < st.peers.size(); ++r)
      if (static_cast<int>(r) != st.worker->rank() && st.peers[r])
        self->send<caf::message_priority::high>(st.peers[r], peer_failed_atom::value, st.step,
                                                static_cast<int32_t>(st.worker->rank()), what);
}

/// The step's `sched` line: what this actor's thread (the rank's compute thread) did since the
/// step began, `cpu_us:C runnable_us:R` (runnable: waiting for a core). None when the kernel keeps
/// no scheduler statistics.
void log_thread_times(StageActorState& st) {
  const ThreadTimes now = this_thread_times();
  if (now.tid == 0 || st.step_began.tid != now.tid) return;
  log_event(
      st.worker->rank(), st.step, "sched",
      "cpu_us:" + std::to_string((now.cpu_ns - st.step_began.cpu_ns) / 1000) +
          " runnable_us:" + std::to_string((now.runnable_ns - st.step_began.runnable_ns) / 1000));
}

void pump(StageActor* self) {
  auto& st = self->state;
  if (st.failed || !st.driver) return;
  try {
    bool yielded = st.worker->run_ready(
        [self](Notification&& n) {
          auto& s = self->state;
          const StageActorHandle& dest = s.peers.at(s.stage_to_rank.at(n.stage));
          // The line is written once the message is on its way, with the time it left.
          const long long sent_at = message_log_enabled() ? message_log_now_us() : 0;
          const Notification head{n.step, n.stage, n.direction, n.microbatch, n.source, {}};
          self->send(dest, std::move(n));
          if (sent_at != 0)
            log_event_at(s.worker->rank(), head.step, "send", describe(head), sent_at);
        },
        [self](const char* event, const schedules::Action& action) {
          if (message_log_enabled())
            log_event(self->state.worker->rank(), self->state.step, event, to_string(action));
        },
        // Between two actions, let waiting messages in (abort, status, a peer's failure, new
        // arrivals the policy may prefer), then resume: control never waits behind a whole run.
        [self] { return !self->mailbox().empty(); });
    if (yielded) {
      if (!st.resume_pending) {
        st.resume_pending = true;
        self->send(self, resume_atom::value, st.step);
      }
      return;
    }
    if (st.worker->finished()) {
      if (message_log_enabled()) {  // tp-trace: this rank's step is whole
        log_thread_times(st);
        log_event(st.worker->rank(), st.step, "done", "step");
      }
      // The last of the process's ranks to finish reports for all of them.
      if (!st.tally || st.tally->left.fetch_sub(1, std::memory_order_acq_rel) == 1)
        caf::anon_send(st.driver, done_atom::value, st.step, st.worker->rank(),
                       static_cast<int32_t>(st.tally ? st.tally->ranks : 1));
      st.driver = nullptr;
      st.tally = nullptr;
      st.in_step.reset();
    }
  } catch (const std::exception& e) {
    fail(self, e.what(), true);
  }
}

void arrived(StageActor* self, const Notification& n) {
  try {
    self->state.worker->on_arrival(n);
  } catch (const std::exception& e) {
    if (n.step == self->state.step) fail(self, e.what(), true);
    return;
  }
  pump(self);
}

/// "rank 1 (host)", the schedule rank hosting `stage`.
std::string host_of(StageActor* self, int stage) {
  auto& st = self->state;
  const int rank = stage >= 0 && stage < static_cast<int>(st.stage_to_rank.size())
                       ? st.stage_to_rank[stage]
                       : -1;
  if (rank >= 0 && rank < static_cast<int>(st.rank_names.size())) return st.rank_names[rank];
  return "rank " + std::to_string(rank);
}

constexpr size_t kMaxRejectedSteps = 16;  // steps not begun yet with a mismatch kept for them

/// A neighbour's notification for `n`'s stage was well routed but its tensors do not match what
/// the stage was built for (`mismatch`): the step it names fails on every rank, now if it runs,
/// when it begins if it has not yet; a step that is over only counts it (done by the caller).
void reject(StageActor* self, const Notification& n, const std::string& mismatch) {
  auto& st = self->state;
  const int from = n.direction == Direction::Forward ? n.stage - 1 : n.stage + 1;
  std::string what = "it rejected " + describe(n) + " of step " + std::to_string(n.step) +
                     " from " + host_of(self, from) + ": " + mismatch +
                     "; the ranks' stages disagree (build every rank's stages from the same "
                     "model, split and dtypes; a stage's output shape may not depend on its data)";
  if (n.step == st.step) {
    if (st.driver) fail(self, what, true);
    return;
  }
  if (n.step < st.step || st.rejected.count(n.step)) return;
  st.rejected.emplace(n.step, std::move(what));
  if (st.rejected.size() > kMaxRejectedSteps) st.rejected.erase(std::prev(st.rejected.end()));
}

/// Tells the stage actor `actor` (from any thread) that the tensors of `n` are here.
void tell_arrived(const StageActorHandle& actor, const Notification& n) {
  caf::anon_send(actor, TensorsArrived{n.tag()});
}

/// The one inbound adapter: a notification for `worker`'s stage actor `actor` (decoded from a
/// channel message on the channel's thread, or received as a CAF message by the actor itself),
/// from `peer` (the global rank it came from). Its receive is posted; the actor hears when the
/// tensors are here, or why they will not come (a failed arrival is kept in the worker and
/// thrown by on_arrival; a neighbour's mismatch is kept for the actor, which fails the step it
/// names). `from_elsewhere`: the sender may be in another process (checked in full).
/// `arrived_now` runs when the tensors are here at once: the actor itself runs what they allow,
/// another thread tells the actor. Either way before the line is written, which stays off the
/// hop it times.
template <typename ArrivedNow>
void accept_notification(StageWorker& worker, const StageActorHandle& actor, const Notification& n,
                         int peer, bool from_elsewhere, ArrivedNow&& arrived_now) {
  auto tell = [actor](const Notification& done) { tell_arrived(actor, done); };
  Acceptance a = worker.accept(n, from_elsewhere, tell);
  switch (a.kind) {
    case Acceptance::Kind::Posted:
      break;
    case Acceptance::Kind::Arrived:
      arrived_now(n);
      break;
    case Acceptance::Kind::Rejected:
      // From the neighbour's rank, for a step of this schedule: the step cannot succeed. The
      // rejection waits in the worker for the actor, which fails the step it names.
      if (!a.mismatch.empty() && peer == n.source &&
          worker.keep_rejection(n, std::move(a.mismatch)))
        caf::anon_send(actor, rejected_atom::value);
      return;
    case Acceptance::Kind::Failed:
      worker.fail_arrival(n, a.error);
      tell(n);
      break;
  }
  worker.log_received(n, a);
}

/// A rank that went down fails the step if the step still needs its tensors. Checked a moment
/// after the news: a rank that finished its part and left may have notifications still on the
/// way (they travel apart from CAF's down message).
void check_gone(StageActor* self) {
  auto& st = self->state;
  if (st.failed || !st.driver) return;
  for (const auto& [rank, why] : st.gone) {
    if (!st.worker->needs_rank(st.stage_to_rank, rank)) continue;
    // The other ranks hear it too, so every rank's error names the rank that is gone.
    std::string name = rank < static_cast<int>(st.rank_names.size())
                           ? st.rank_names[rank]
                           : "rank " + std::to_string(rank);
    fail(self,
         name + " is gone (its stage actor is down: " + why + ") and rank " +
             std::to_string(st.worker->rank()) + " still waits for its tensors",
         true);
    return;
  }
}

constexpr auto kGoneGrace = std::chrono::seconds(1);

/// Messages that may come from other processes are accepted only from this job's members.
bool trusted(StageActor* self, const char* what) {
  const caf::strong_actor_ptr& sender = self->current_sender();
  if (sender && sender->node() == self->node()) return true;
  const auto& members = self->state.members;
  if (members && distributed::detail::from_member(sender, self->node(), *members)) return true;
  distributed::detail::report_intruder(self->system(), self->state.worker->rank(),
                                       sender ? sender->node() : caf::node_id(), what);
  return false;
}

/// What this rank does in `step`, for a step that did not finish on time: what it waits for, or
/// that it has not started the step (its process has not called step() for it) or left it.
std::string describe_step(StageActor* self, uint64_t step) {
  auto& st = self->state;
  const std::string rank = "rank " + std::to_string(st.worker->rank());
  const std::string number = std::to_string(step);
  if (st.step == 0)
    return rank + ": no step started: its process has not called step() for step " + number +
           " (it is busy before it, or calls step() fewer times than the others)";
  if (st.step < step)
    return rank + ": has not started step " + number +
           ": its process has not called step() for it (its last step was " +
           std::to_string(st.step) + "; it is busy before it, or calls step() fewer times)";
  if (st.step > step)
    return rank + ": already in step " + std::to_string(st.step) + ", past step " + number;
  if (st.failed) return rank + ": step " + number + " failed here (its own error says why)";
  return st.worker->describe_wait();
}

/// Step `step` begins here: it fails at once if another rank's failure or a rejected
/// neighbour's tensors already doomed it, else the worker runs what is ready.
void begin(StageActor* self, uint64_t step, StepHandle data, StepTallyHandle tally) {
  auto& st = self->state;
  st.driver = caf::actor_cast<caf::actor>(self->current_sender());
  st.tally = std::move(tally);
  st.step = step;
  st.failed = false;
  st.in_step.emplace();
  if (!st.named) {  // this actor's own thread (it is detached), named for thread listings
    pthread_setname_np(pthread_self(), "tp-stage");
    st.named = true;
  }
  // An evaluation (forward only) is logged as such: tp-trace counts training steps apart.
  if (message_log_enabled()) {
    st.step_began = this_thread_times();
    log_event(st.worker->rank(), step, "recv", data && !data->training ? "eval" : "step");
  }
  st.worker->begin_step(std::move(data));
  if (!st.gone.empty()) self->delayed_send(self, kGoneGrace, check_gone_atom::value, step);
  if (auto it = st.failed_elsewhere.find(step); it != st.failed_elsewhere.end()) {
    auto [rank, what] = it->second;
    st.failed_elsewhere.erase(st.failed_elsewhere.begin(), std::next(it));
    st.failed = true;
    st.in_step.reset();
    caf::anon_send(st.driver, failed_atom::value, step, rank, what);
    return;
  }
  // A neighbour's tensors for this step were rejected before it began here.
  st.rejected.erase(st.rejected.begin(), st.rejected.lower_bound(step));
  if (auto it = st.rejected.find(step); it != st.rejected.end()) {
    std::string what = std::move(it->second);
    st.rejected.erase(it);
    fail(self, what, true);
    return;
  }
  pump(self);
}

/// Rank `rank` failed step `step` with `what`: this rank's step ends, or will when it begins.
void peer_failed(StageActor* self, uint64_t step, int32_t rank, const std::string& what) {
  if (!trusted(self, "a step failure")) return;
  auto& st = self->state;
  if (step == st.step && st.driver) {
    if (!st.failed) {
      st.failed = true;
      st.in_step.reset();
      caf::anon_send(st.driver, failed_atom::value, st.step, static_cast<int>(rank), what);
    }
  } else if (step > st.step) {  // this rank has not begun that step yet
    st.failed_elsewhere.emplace(step, std::make_pair(static_cast<int>(rank), what));
  }
}

StageActorHandle::behavior_type stage_actor(
    StageActor* self, std::shared_ptr<StageWorker> worker, std::vector<int> stage_to_rank,
    std::shared_ptr<distributed::detail::CollectiveInbox> members,
    std::shared_ptr<const void> keep_alive) {
  self->state.worker = std::move(worker);
  self->state.keep_alive = std::move(keep_alive);
  self->state.stage_to_rank = std::move(stage_to_rank);
  self->state.distributed = members != nullptr;
  self->state.members = std::move(members);
  self->set_down_handler([self](const caf::down_msg& m) {
    auto& st = self->state;
    for (size_t r = 0; r < st.peers.size(); ++r) {
      if (!st.peers[r] || st.peers[r].address() != m.source) continue;
      st.gone[static_cast<int>(r)] = self->system().render(m.reason);
      self->delayed_send(self, kGoneGrace, check_gone_atom::value, st.step);
    }
  });
  return {
      [self](peers_atom, const std::vector<caf::actor>& peers, std::vector<std::string> names) {
        auto& st = self->state;
        st.peers.clear();
        for (const caf::actor& p : peers) st.peers.push_back(caf::actor_cast<StageActorHandle>(p));
        st.rank_names = std::move(names);
        // Across processes a peer can die: watch the others (CAF's heartbeats and the closed
        // connection tell).
        if (st.distributed)
          for (size_t r = 0; r < st.peers.size(); ++r)
            if (static_cast<int>(r) != st.worker->rank() && st.peers[r]) self->monitor(st.peers[r]);
      },
      [self](check_gone_atom, uint64_t step) {
        if (step == self->state.step) check_gone(self);
      },
      [self](step_atom, uint64_t step, StepHandle data, StepTallyHandle tally) {
        begin(self, step, std::move(data), std::move(tally));
      },
      [self](Notification& note) {
        if (!trusted(self, "a notification")) return;
        auto& st = self->state;
        accept_notification(*st.worker, caf::actor_cast<StageActorHandle>(self), note, note.source,
                            st.distributed, [self](const Notification& n) { arrived(self, n); });
      },
      [self](rejected_atom) {
        // The rejections themselves come from this process's channel thread, through the worker:
        // this message only says that there are some.
        for (const StageWorker::Rejection& r : self->state.worker->take_rejections())
          reject(self, r.note, r.mismatch);
      },
      [self](const TensorsArrived& m) {
        Notification n{m.tag.step, m.tag.stage, m.tag.direction, m.tag.microbatch, 0, {}};
        arrived(self, n);
      },
      [self](peer_failed_atom, uint64_t step, int32_t rank, const std::string& what) {
        peer_failed(self, step, rank, what);
      },
      [self](resume_atom, uint64_t step) {
        self->state.resume_pending = false;
        if (step == self->state.step) pump(self);
      },
      [self](abort_atom, uint64_t step) {
        self->state.worker->abort_step(step);
        self->state.driver = nullptr;
        self->state.tally = nullptr;
      },
      [self](status_atom, uint64_t step) -> std::string { return describe_step(self, step); },
  };
}

}  // namespace

StageActorHandle spawn_stage_actor(caf::actor_system& system, std::shared_ptr<StageWorker> worker,
                                   std::vector<int> stage_to_rank,
                                   std::shared_ptr<distributed::detail::CollectiveInbox> members,
                                   std::shared_ptr<const void> keep_alive) {
  return system.spawn<caf::detached>(stage_actor, std::move(worker), std::move(stage_to_rank),
                                     std::move(members), std::move(keep_alive));
}

namespace {

StatusActorHandle::behavior_type status_actor(StatusActorHandle::pointer self,
                                              std::shared_ptr<StageWorker> worker,
                                              StageActorHandle stage) {
  self->link_to(stage);
  return {
      [self, worker, stage](status_atom, uint64_t step) -> caf::result<std::string> {
        std::string busy = worker->running();
        if (!busy.empty()) return busy;
        return self->delegate(stage, status_atom::value, step);
      },
  };
}

}  // namespace

StatusActorHandle spawn_status_actor(caf::actor_system& system, std::shared_ptr<StageWorker> worker,
                                     StageActorHandle stage) {
  return system.spawn(status_actor, std::move(worker), std::move(stage));
}

/// A notification that came on the channel (its thread) for the stage actor `actor`, from channel
/// peer `peer`: decoded, checked, and its receive posted. A rejected one is counted; a
/// neighbour's mismatched tensors are kept for the actor, which fails their step.
void deliver_notification(StageWorker& worker, const StageActorHandle& actor, int peer,
                          std::string_view bytes) {
  Notification n;
  if (std::string error = decode_notification(bytes, n); !error.empty()) {
    note_rejected_message(worker.rank(), "malformed notification: " + error);
    return;
  }
  accept_notification(worker, actor, n, peer, /*from_elsewhere=*/true,
                      [&actor](const Notification& done) { tell_arrived(actor, done); });
}

}  // namespace tensorplay::pipelining::detail
