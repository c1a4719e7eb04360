// Each process's actor: rank 0's side of the rendezvous (answers decided by RendezvousBook), clock
// samples, collectives' contributions, peers' failure notices, and the watch on other processes.
#include "tensorplay/distributed/detail/process_actor.h"

#include <caf/io/all.hpp>
#include <cstdio>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "tensorplay/distributed/detail/rendezvous.h"
#include "tensorplay/wire/detail/caf_messages.h"

namespace tensorplay::distributed::detail {
namespace {

using pipelining::detail::collective_atom;
using pipelining::detail::hello_atom;
using pipelining::detail::ping_atom;
using drop_atom = caf::atom_constant<caf::atom("drop")>;        // end a gone peer's transfers
using expired_atom = caf::atom_constant<caf::atom("rdzvexp")>;  // a joined rank's wait ran out

/// How long a gone peer's transfers may still complete: a rank that sent its last tensors and
/// exited normally leaves bytes that are here, or on the way, for receives about to be posted.
constexpr auto kDropGrace = std::chrono::seconds(1);

struct ProcessActorState {
  std::shared_ptr<CollectiveInbox> inbox;
  int rank = 0;
  std::string token;
  // Rendezvous (rank 0 only): its record, and the answers owed to the ranks that joined.
  std::optional<RendezvousBook> book;
  std::map<int, caf::response_promise> waiting;  // by rank
  std::map<caf::actor_addr, int> monitored;      // process actor -> rank
};

using ProcessActor = caf::stateful_actor<ProcessActorState>;

caf::node_id sender_node(caf::local_actor* self) {
  const auto& sender = self->current_sender();
  return sender ? sender->node() : caf::node_id();
}

bool from_this_process(caf::local_actor* self) {
  return self->current_sender() && self->current_sender()->node() == self->node();
}

/// Answers every rank still waiting at the rendezvous: the table, or why it ended.
void answer_waiting(ProcessActor* self, const std::vector<PeerEntry>& table,
                    const std::string& why) {
  for (auto& [rank, promise] : self->state.waiting) promise.deliver(table, why);
  self->state.waiting.clear();
}

caf::response_promise on_hello(ProcessActor* self, PeerEntry entry) {
  auto& st = self->state;
  // Before the promise: making it takes the sender out of the current message.
  const caf::strong_actor_ptr sender = self->current_sender();
  auto promise = self->make_response_promise();
  if (!sender) {
    promise.deliver(std::vector<PeerEntry>{}, std::string("a hello must come from an actor"));
    return promise;
  }
  if (!same_token(entry.token, st.token))
    report_intruder(
        self->system(), st.rank, sender->node(),
        "a hello claiming rank " + std::to_string(entry.rank) +
            (entry.token.empty() ? " without a cluster token" : " with a wrong cluster token"));
  const int rank = entry.rank;
  const auto wait = std::chrono::milliseconds(std::max<int64_t>(entry.wait_ms, 1));
  const bool same_node = entry.actor && entry.actor.node() == sender->node();
  HelloOutcome out = st.book->hello(std::move(entry), same_node);
  using Kind = HelloOutcome::Kind;
  if (out.kind == Kind::kWait || out.kind == Kind::kComplete) st.inbox->admit(sender->node());
  if (out.kind == Kind::kWait) {
    st.waiting.emplace(rank, promise);
    self->delayed_send(self, wait, expired_atom::value, rank);
  } else if (out.kind == Kind::kComplete) {
    promise.deliver(st.book->table(), std::string());
    answer_waiting(self, st.book->table(), std::string());
  } else {
    promise.deliver(std::vector<PeerEntry>{}, out.to_sender);
    if (out.kind == Kind::kEnd) answer_waiting(self, {}, out.to_waiting);
  }
  return promise;
}

void on_expired(ProcessActor* self, int rank) {
  if (!from_this_process(self)) return;
  if (std::string why = self->state.book->expire(rank); !why.empty()) answer_waiting(self, {}, why);
}

void on_down(ProcessActor* self, const caf::down_msg& m) {
  auto it = self->state.monitored.find(m.source);
  if (it == self->state.monitored.end()) return;
  const int rank = it->second;
  std::string why = "its connection closed (" + self->system().render(m.reason) + ")";
  // A process gone without leaving the job (killed, crashed): said at once, in one write, since
  // a launcher (mpirun, tp-launch) may kill this process as soon as it sees the other die.
  if (m.reason == caf::exit_reason::remote_link_unreachable) {
    const std::string line = "tensorplay: rank " + std::to_string(self->state.rank) + ": rank " +
                             std::to_string(rank) + " is gone: " + why + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
  self->state.inbox->peer_down(rank, why);
  self->delayed_send(self, kDropGrace, drop_atom::value, rank, why);
}

/// True when the current message comes from a member; reports `what` as dropped otherwise.
bool member_or_report(ProcessActor* self, const char* what) {
  if (from_member(self->current_sender(), self->node(), *self->state.inbox)) return true;
  report_intruder(self->system(), self->state.rank, sender_node(self), what);
  return false;
}

caf::behavior process_actor(ProcessActor* self, std::shared_ptr<CollectiveInbox> inbox,
                            int world_size, std::string token, int rank, std::string job) {
  self->state.inbox = std::move(inbox);
  self->state.rank = rank;
  self->state.book.emplace(world_size, token, std::move(job));
  self->state.token = std::move(token);
  self->set_down_handler([self](const caf::down_msg& m) { on_down(self, m); });
  return {
      [self](hello_atom, PeerEntry entry) { return on_hello(self, std::move(entry)); },
      [self](expired_atom, int rank) { on_expired(self, rank); },
      [self](ping_atom) -> caf::result<int64_t> {
        if (!member_or_report(self, "a clock sample request"))
          return caf::sec::request_receiver_down;
        return steady_now_us();
      },
      [self](collective_atom, Contribution c) {
        if (!from_member(self->current_sender(), self->node(), *self->state.inbox) &&
            self->current_sender() && self->state.inbox->hold(sender_node(self), c))
          return;
        if (member_or_report(self, "a collective contribution"))
          self->state.inbox->put(std::move(c));
      },
      [self](pipelining::detail::dp_failed_atom, uint32_t stream, uint64_t step, int32_t rank,
             const std::string& why) {
        if (member_or_report(self, "a data-parallel failure notice"))
          self->state.inbox->stream_failed(stream, step, rank, why);
      },
      [self](drop_atom, int rank, const std::string& why) {
        if (from_this_process(self)) self->state.inbox->transport_down(rank, why);
      },
      [self](watch_atom, caf::actor peer, int rank) {
        if (!from_this_process(self)) {
          report_intruder(self->system(), self->state.rank, sender_node(self), "a watch request");
          return;
        }
        if (!peer || self->state.monitored.count(peer.address())) return;
        self->monitor(peer);
        self->state.monitored[peer.address()] = rank;
      },
  };
}

}  // namespace

int64_t steady_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

caf::actor spawn_process_actor(caf::actor_system& system, std::shared_ptr<CollectiveInbox> inbox,
                               int world_size, std::string token, int rank, std::string job) {
  return system.spawn(process_actor, std::move(inbox), world_size, std::move(token), rank,
                      std::move(job));
}

}  // namespace tensorplay::distributed::detail
