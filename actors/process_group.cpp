// Process groups over CAF's middleman: rendezvous at rank 0, direct connections between ranks,
// collectives as contributions sent to every member's process actor.
#include "actors/process_group.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <caf/io/all.hpp>
#include <cstring>
#include <fstream>
#include <thread>

#include "actors/detail/caf_system.h"
#include "actors/detail/cluster.h"
#include "actors/message_log.h"
#include "tensors/device_info.h"
#include "tensors/knobs.h"
#include "tensors/tensors.h"
#include "transport/ring_all_reduce.h"
#include "transport/ucx_channel.h"

namespace tensorplay::distributed {

using pipelining::detail::collective_atom;
using pipelining::detail::hello_atom;
using pipelining::detail::ping_atom;
using pipelining::detail::process_actor_system;

namespace detail {
namespace {

std::unique_ptr<Cluster>& cluster_slot() {
  static std::unique_ptr<Cluster> cluster;
  return cluster;
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Constant-time comparison, so a wrong token's timing says nothing about the right one.
bool same_token(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

// -- the process actor
// -----------------------------------------------------------------------------

using watch_atom = caf::atom_constant<caf::atom("watch")>;  // monitor a peer's process actor
using drop_atom = caf::atom_constant<caf::atom("drop")>;    // end a gone peer's transfers

/// How long a gone peer's transfers may still complete: a rank that sent its last tensors and
/// exited normally leaves bytes that are here, or on the way, for receives about to be posted.
constexpr auto kDropGrace = std::chrono::seconds(1);

struct ProcessActorState {
  std::shared_ptr<Inbox> inbox;
  int world_size = 1;
  int rank = 0;
  std::string token;
  // Rendezvous (rank 0 only): who joined, and the promises to answer when all have.
  std::vector<PeerEntry> joined;
  std::vector<caf::response_promise> waiting;
  std::map<caf::actor_addr, int> monitored;  // process actor -> rank
};

using ProcessActor = caf::stateful_actor<ProcessActorState>;

caf::node_id sender_node(caf::local_actor* self) {
  const auto& sender = self->current_sender();
  return sender ? sender->node() : caf::node_id();
}

caf::behavior process_actor(ProcessActor* self, std::shared_ptr<Inbox> inbox, int world_size,
                            std::string token, int rank) {
  self->state.inbox = std::move(inbox);
  self->state.world_size = world_size;
  self->state.rank = rank;
  self->state.token = std::move(token);
  self->set_down_handler([self](const caf::down_msg& m) {
    auto it = self->state.monitored.find(m.source);
    if (it == self->state.monitored.end()) return;
    const int rank = it->second;
    std::string why = "its connection closed (" + self->system().render(m.reason) + ")";
    self->state.inbox->peer_down(rank, why);
    self->delayed_send(self, kDropGrace, drop_atom::value, rank, why);
  });
  return {
      [self](hello_atom, PeerEntry entry) -> caf::response_promise {
        auto& st = self->state;
        // Before the promise: making it takes the sender out of the current message.
        const caf::strong_actor_ptr sender = self->current_sender();
        auto promise = self->make_response_promise();
        auto refuse = [&](const std::string& why) {
          promise.deliver(std::vector<PeerEntry>{}, why);
          return promise;
        };
        if (!sender) return refuse("a hello must come from an actor");
        if (!same_token(entry.token, st.token)) {
          report_intruder(self->system(), self->state.rank, sender->node(),
                          "a hello claiming rank " + std::to_string(entry.rank) +
                              (entry.token.empty() ? " without a cluster token"
                                                   : " with a wrong cluster token"));
          return refuse(
              "rank " + std::to_string(entry.rank) +
              " presented a different cluster token (TENSORPLAY_CLUSTER_TOKEN) than rank 0");
        }
        if (!entry.actor || entry.actor.node() != sender->node())
          return refuse("rank " + std::to_string(entry.rank) +
                        "'s hello names a process actor on another node than its sender");
        if (entry.world_size != st.world_size)
          return refuse("rank " + std::to_string(entry.rank) +
                        " was started with WORLD_SIZE=" + std::to_string(entry.world_size) +
                        ", rank 0 with " + std::to_string(st.world_size));
        if (entry.rank < 0 || entry.rank >= st.world_size)
          return refuse("rank " + std::to_string(entry.rank) +
                        " is out of range for WORLD_SIZE=" + std::to_string(st.world_size));
        for (const PeerEntry& e : st.joined)
          if (e.rank == entry.rank)
            return refuse("rank " + std::to_string(entry.rank) + " joined twice (from " + e.host +
                          " and " + entry.host + "): each process needs its own RANK");
        st.inbox->admit(sender->node());
        st.joined.push_back(std::move(entry));
        st.waiting.push_back(promise);
        if (static_cast<int>(st.joined.size()) == st.world_size) {
          std::sort(st.joined.begin(), st.joined.end(),
                    [](const PeerEntry& a, const PeerEntry& b) { return a.rank < b.rank; });
          for (auto& p : st.waiting) p.deliver(st.joined, std::string());
          st.waiting.clear();
        }
        return promise;
      },
      [self](ping_atom) -> caf::result<int64_t> {
        if (!from_member(self->current_sender(), self->node(), *self->state.inbox)) {
          report_intruder(self->system(), self->state.rank, sender_node(self),
                          "a clock sample request");
          return caf::sec::request_receiver_down;
        }
        return now_us();
      },
      [self](collective_atom, Contribution c) {
        if (!from_member(self->current_sender(), self->node(), *self->state.inbox)) {
          if (self->current_sender() && self->state.inbox->hold(sender_node(self), c)) return;
          report_intruder(self->system(), self->state.rank, sender_node(self),
                          "a collective contribution");
          return;
        }
        self->state.inbox->put(std::move(c));
      },
      [self](pipelining::detail::dp_failed_atom, uint32_t stream, uint64_t step, int32_t rank,
             const std::string& why) {
        if (!from_member(self->current_sender(), self->node(), *self->state.inbox)) {
          report_intruder(self->system(), self->state.rank, sender_node(self),
                          "a data-parallel failure notice");
          return;
        }
        self->state.inbox->stream_failed(stream, step, rank, why);
      },
      [self](drop_atom, int rank, const std::string& why) {
        if (self->current_sender() && self->current_sender()->node() == self->node())
          self->state.inbox->transport_down(rank, why);
      },
      [self](watch_atom, caf::actor peer, int rank) {
        if (!self->current_sender() || self->current_sender()->node() != self->node()) {
          report_intruder(self->system(), self->state.rank, sender_node(self), "a watch request");
          return;
        }
        if (!peer || self->state.monitored.count(peer.address())) return;
        self->monitor(peer);
        self->state.monitored[peer.address()] = rank;
      },
  };
}

// -- addresses
// -------------------------------------------------------------------------------------

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

/// The local address this host uses to reach `host` (for peers to connect back to us).
std::string local_address_towards(const std::string& host, int port) {
  if (is_loopback(host)) return "127.0.0.1";
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &target.sin_addr) != 1) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found) return "0.0.0.0";
    target.sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
    ::freeaddrinfo(found);
    if (is_loopback(inet_ntoa(target.sin_addr))) return "127.0.0.1";
  }
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return "0.0.0.0";
  std::string out = "0.0.0.0";
  if (::connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof target) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof local;
    char text[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        inet_ntop(AF_INET, &local.sin_addr, text, sizeof text))
      out = text;
  }
  ::close(fd);
  return out;
}

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

/// Names this machine: processes with the same boot id share a kernel (and its shared memory),
/// whatever network namespace they are in.
std::string machine_id() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(boot, id);
  return id + "/" + host_name();
}

uint64_t group_hash(const std::vector<int>& ranks) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (int r : ranks) {
    h ^= static_cast<uint64_t>(r) + 1;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return "[" + out + "]";
}

}  // namespace

// -- Inbox
// -----------------------------------------------------------------------------------------

std::map<int, Contribution> Inbox::take(uint64_t key, const std::vector<int>& from,
                                        std::chrono::steady_clock::time_point deadline,
                                        const std::string& what) {
  std::unique_lock lock(mutex_);
  auto missing = [&] {
    std::vector<int> out;
    auto it = got_.find(key);
    for (int r : from)
      if (it == got_.end() || !it->second.count(r)) out.push_back(r);
    return out;
  };
  auto gone = [&]() -> std::string {
    for (int r : missing())
      if (auto d = down_.find(r); d != down_.end())
        return "rank " + std::to_string(r) + " is gone: " + d->second;
    return {};
  };
  while (!missing().empty()) {
    if (std::string g = gone(); !g.empty()) throw DistributedError(what + " failed: " + g);
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !missing().empty())
      throw DistributedError(what + " timed out: rank(s) " + join_ranks(missing()) +
                             " did not take part in time");
  }
  auto node = got_.extract(key);
  return std::move(node.mapped());
}

// -- Cluster
// ---------------------------------------------------------------------------------------

Cluster* Cluster::current() { return cluster_slot().get(); }

Cluster::~Cluster() {
  inbox->on_peer_down(nullptr);
  if (self_actor) caf::anon_send_exit(self_actor, caf::exit_reason::user_shutdown);
}

std::string Cluster::describe(int rank) const {
  if (rank >= 0 && rank < static_cast<int>(peers.size()) && !peers[rank].host.empty())
    return "rank " + std::to_string(rank) + " (" + peers[rank].host + ")";
  return "rank " + std::to_string(rank);
}

void Cluster::notify_stream_failure(const std::vector<int>& ranks, uint32_t stream, uint64_t step,
                                    const std::string& why) {
  for (int r : ranks)
    if (r != env.rank && r >= 0 && r < static_cast<int>(peers.size()) && peers[r].actor)
      caf::send_as(self_actor, peers[r].actor, pipelining::detail::dp_failed_atom::value, stream,
                   step, static_cast<int32_t>(env.rank), why);
}

uint32_t Cluster::next_stream(const std::vector<int>& ranks) {
  uint64_t hash = group_hash(ranks);
  std::lock_guard lock(seq_mutex_);
  // Consecutive schedules of one group differ in the low bits (the UCX tags keep four of them).
  return static_cast<uint32_t>(hash >> 32) * 16 + ++streams_[hash];
}

uint32_t Cluster::collective_stream(const std::vector<int>& ranks) const {
  return static_cast<uint32_t>(group_hash(ranks) >> 32) * 16;
}

uint64_t Cluster::next_collective_call(const std::vector<int>& ranks) {
  std::lock_guard lock(seq_mutex_);
  return ++calls_[group_hash(ranks)];
}

std::vector<Contribution> Cluster::exchange(const std::vector<int>& ranks, std::string bytes,
                                            std::vector<caf::actor> actors,
                                            const std::string& what) {
  if (std::find(ranks.begin(), ranks.end(), env.rank) == ranks.end())
    throw DistributedError(what + ": rank " + std::to_string(env.rank) +
                           " is not a member of the group " + join_ranks(ranks));
  uint64_t hash = group_hash(ranks);
  uint32_t seq;
  {
    std::lock_guard lock(seq_mutex_);
    seq = ++seq_[hash];
  }
  uint64_t key = (hash << 32) ^ seq;
  Contribution mine{key, env.rank, std::move(bytes), std::move(actors)};
  for (int r : ranks)
    if (r != env.rank) caf::send_as(self_actor, peers.at(r).actor, collective_atom::value, mine);
  inbox->put(std::move(mine));
  auto got = inbox->take(key, ranks, std::chrono::steady_clock::now() + timeout,
                         what + " on group " + join_ranks(ranks));
  std::vector<Contribution> out;
  for (int r : ranks) out.push_back(std::move(got.at(r)));
  return out;
}

}  // namespace detail

using detail::Cluster;
using pipelining::detail::PeerEntry;

namespace {

Cluster& cluster_or_throw(const char* what) {
  Cluster* c = Cluster::current();
  if (!c)
    throw DistributedError(std::string(what) +
                           ": the process group is not initialized; call "
                           "tensorplay::distributed::init_process_group() first");
  return *c;
}

void connect_to_job(Cluster& c, const InitOptions& options) {
  caf::actor_system& system = process_actor_system();
  const LaunchEnv& env = c.env;
  std::string token = knob_string(Knob::ClusterToken);
  c.self_actor = system.spawn(detail::process_actor, c.inbox, env.world_size, token, env.rank);
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  std::string my_host = detail::local_address_towards(env.master_addr, env.master_port);

  // Publish this process's actor: rank 0 on MASTER_PORT (the rendezvous), others anywhere.
  uint16_t want = env.rank == 0 ? static_cast<uint16_t>(env.master_port) : 0;
  std::string bind = env.rank == 0 ? env.master_addr : my_host;
  const char* bind_at = bind == "0.0.0.0" ? nullptr : bind.c_str();
  auto published = system.middleman().publish(c.self_actor, want, bind_at, env.rank == 0);
  if (!published)
    throw DistributedError("init_process_group: rank " + std::to_string(env.rank) +
                           " could not listen on " + bind + ":" + std::to_string(want) + " (" +
                           system.render(published.error()) + ")" +
                           (env.rank == 0 ? "; is MASTER_PORT in use?" : ""));
  c.port = *published;

  PeerEntry me;
  me.rank = env.rank;
  me.world_size = env.world_size;
  me.host = env.rank == 0 ? env.master_addr : my_host;
  me.machine = detail::machine_id();
  me.port = c.port;
  me.token = token;
  me.actor = c.self_actor;
  if (c.ucx) {
    auto address = static_cast<transport::UcxChannel&>(*c.ucx).address();
    me.ucx.assign(address.begin(), address.end());
  }

  caf::actor root = c.self_actor;
  if (env.rank != 0) {
    std::string last_error;
    for (;;) {
      auto r =
          system.middleman().remote_actor(env.master_addr, static_cast<uint16_t>(env.master_port));
      if (r) {
        root = *r;
        break;
      }
      last_error = system.render(r.error());
      if (std::chrono::steady_clock::now() > deadline)
        throw DistributedError("init_process_group: rank " + std::to_string(env.rank) +
                               " could not reach rank 0 at " + env.master_addr + ":" +
                               std::to_string(env.master_port) + " within " +
                               std::to_string(options.timeout.count()) + " ms (" + last_error +
                               "); is rank 0 running, and are MASTER_ADDR/MASTER_PORT right?");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  caf::scoped_actor self{system};
  std::vector<PeerEntry> table;
  std::string refused;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  self->request(root, std::max(left, std::chrono::milliseconds(1)), hello_atom::value, me)
      .receive(
          [&](std::vector<PeerEntry>& t, std::string& why) {
            table = std::move(t);
            refused = std::move(why);
          },
          [&](caf::error& e) {
            refused = "rank 0 did not complete the rendezvous within " +
                      std::to_string(options.timeout.count()) + " ms (" + system.render(e) +
                      "): not every one of the " + std::to_string(env.world_size) +
                      " ranks (WORLD_SIZE) joined";
          });
  if (!refused.empty()) throw DistributedError("init_process_group: " + refused);
  if (static_cast<int>(table.size()) != env.world_size)
    throw DistributedError("init_process_group: rank 0 answered with " +
                           std::to_string(table.size()) + " ranks, expected " +
                           std::to_string(env.world_size));
  c.peers = std::move(table);
  // Rank 0 vouches for every process in its table: they all presented the token.
  for (const PeerEntry& p : c.peers)
    if (p.actor) c.inbox->admit(p.actor.node());
  // A peer's process gone: its transfers end now, not at their timeouts (receives fail naming
  // it, sends are dropped). Holds the channel weakly: the hook may run while the group closes.
  std::vector<std::string> names;
  for (int r = 0; r < env.world_size; ++r) names.push_back(c.describe(r));
  c.inbox->on_peer_down([channel = std::weak_ptr<transport::Channel>(c.ucx), names](
                            int rank, const std::string& why) {
    if (auto ucx = channel.lock(); ucx && rank >= 0 && rank < static_cast<int>(names.size()))
      ucx->drop_peer(rank, names[rank] + " is gone: " + why);
  });
  for (const caf::node_id& stranger : c.inbox->release_held())
    detail::report_intruder(system, env.rank, stranger, "a collective contribution");

  // Direct connections: each rank dials the ranks below it (rank 0 is already connected), so
  // every pair has exactly one connection and control messages never hop through rank 0.
  for (int j = 1; j < env.rank; ++j) {
    const PeerEntry& p = c.peers[j];
    auto r = system.middleman().remote_actor(p.host, p.port);
    if (!r)
      throw DistributedError("init_process_group: rank " + std::to_string(env.rank) +
                             " could not connect to " + c.describe(j) + " at " + p.host + ":" +
                             std::to_string(p.port) + " (" + system.render(r.error()) + ")");
  }
  for (int j = 0; j < env.world_size; ++j)
    if (j != env.rank) self->send(c.self_actor, detail::watch_atom::value, c.peers[j].actor, j);

  // Clock offset to rank 0: the sample with the shortest round trip of a few.
  if (env.rank != 0) {
    int64_t best_rtt = INT64_MAX;
    for (int i = 0; i < 8; ++i) {
      int64_t t0 = detail::now_us();
      self->request(c.peers[0].actor, options.timeout, ping_atom::value)
          .receive(
              [&](int64_t remote) {
                int64_t t1 = detail::now_us();
                if (t1 - t0 < best_rtt) {
                  best_rtt = t1 - t0;
                  c.clock_offset_us = remote - (t0 + t1) / 2;
                }
              },
              [&](caf::error& e) {
                throw DistributedError(
                    "init_process_group: rank 0 did not answer a clock "
                    "sample (" +
                    system.render(e) + ")");
              });
    }
  }

  if (c.ucx) {
    std::vector<std::vector<uint8_t>> addresses;
    std::vector<bool> same_host;
    for (const PeerEntry& p : c.peers) {
      addresses.emplace_back(p.ucx.begin(), p.ucx.end());
      same_host.push_back(p.machine == me.machine);
    }
    static_cast<transport::UcxChannel&>(*c.ucx).connect(addresses, same_host);
  }
  // Everyone connected before anyone uses the group.
  std::vector<int> everyone(env.world_size);
  for (int r = 0; r < env.world_size; ++r) everyone[r] = r;
  c.exchange(everyone, {}, {}, "init_process_group barrier");
}

}  // namespace

// -- ProcessGroup
// ----------------------------------------------------------------------------------

ProcessGroup::ProcessGroup() {
  for (int r = 0; r < get_world_size(); ++r) ranks_.push_back(r);
}

ProcessGroup::ProcessGroup(std::vector<int> ranks) : ranks_(std::move(ranks)) {}

int ProcessGroup::rank() const {
  auto it = std::find(ranks_.begin(), ranks_.end(), get_rank());
  return it == ranks_.end() ? -1 : static_cast<int>(it - ranks_.begin());
}

bool ProcessGroup::contains(int global_rank) const {
  return std::find(ranks_.begin(), ranks_.end(), global_rank) != ranks_.end();
}

std::vector<std::string> ProcessGroup::all_gather_bytes(const std::string& bytes) const {
  if (ranks_.size() == 1 && ranks_[0] == get_rank()) return {bytes};
  auto got = cluster_or_throw("all_gather").exchange(ranks_, bytes, {}, "all_gather");
  std::vector<std::string> out;
  for (auto& c : got) out.push_back(std::move(c.bytes));
  return out;
}

void ProcessGroup::barrier() const {
  if (ranks_.size() == 1 && ranks_[0] == get_rank()) return;
  cluster_or_throw("barrier").exchange(ranks_, {}, {}, "barrier");
}

void ProcessGroup::all_reduce(Tensor& tensor) const {
  if (!tensor.defined()) throw std::invalid_argument("all_reduce: the tensor is undefined");
  if (ranks_.size() == 1 && ranks_[0] == get_rank()) return;
  Cluster& c = cluster_or_throw("all_reduce");
  const std::string where = "all_reduce on group " + detail::join_ranks(ranks_);
  const int me = rank();
  if (me < 0)
    throw DistributedError(where + ": rank " + std::to_string(c.env.rank) +
                           " is not a member of the group");
  if (!c.ucx) throw DistributedError(where + ": this process has no UCX channel to the others");
  NoGradGuard no_grad;
  // Host tensors are summed in place; device tensors through a host copy.
  Tensor host = tensor.is_cuda() ? tensor.detach().cpu() : tensor.detach();
  transport::RingGroup ring{c.ucx.get(), ranks_, me, c.collective_stream(ranks_), c.timeout};
  try {
    transport::ring_all_reduce(ring, c.next_collective_call(ranks_), host);
  } catch (const transport::TransferError& e) {
    throw DistributedError(where + " failed: " + e.what());
  }
  if (tensor.is_cuda()) tensor.copy_(host);
}

// -- free functions
// --------------------------------------------------------------------------------

void init_process_group(const InitOptions& options) {
  if (Cluster::current())
    throw DistributedError(
        "init_process_group: already initialized; call destroy_process_group() first");
  if (options.backend != "ucx" && options.backend != "nccl" && options.backend != "auto")
    throw std::invalid_argument("init_process_group: backend '" + options.backend +
                                "' is not one of \"ucx\", \"nccl\", \"auto\"");
  if (options.timeout.count() <= 0)
    throw std::invalid_argument("init_process_group: timeout must be positive, got " +
                                std::to_string(options.timeout.count()) + " ms");
  auto c = std::make_unique<Cluster>();
  c->env = options.env ? *options.env : read_launch_env();
  c->timeout = options.timeout;
  c->backend = options.backend == "auto" ? (cuda_available() ? "nccl" : "ucx") : options.backend;
  if (c->env.world_size > 1) {
    c->ucx = std::make_shared<transport::UcxChannel>(c->env.rank, c->env.world_size);
    connect_to_job(*c, options);
  } else {
    c->peers.resize(1);
    c->peers[0].host = detail::host_name();
  }
  if (const std::string dir = knob_string(Knob::LogDir); !dir.empty())
    pipelining::log_to_file(dir + "/messages_rank_" + std::to_string(c->env.rank) + ".log");
  pipelining::log_event(c->env.rank, 0, "clock", "offset_us:" + std::to_string(c->clock_offset_us));
  detail::cluster_slot() = std::move(c);
}

bool is_initialized() { return Cluster::current() != nullptr; }
int get_rank() { return Cluster::current() ? Cluster::current()->env.rank : 0; }
int get_world_size() { return Cluster::current() ? Cluster::current()->env.world_size : 1; }
int get_local_rank() { return Cluster::current() ? Cluster::current()->env.local_rank : 0; }
std::string get_backend() { return Cluster::current() ? Cluster::current()->backend : "none"; }
int64_t clock_offset_us() { return Cluster::current() ? Cluster::current()->clock_offset_us : 0; }
ProcessGroup world_group() { return ProcessGroup(); }

ProcessGroup new_group(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  if (ranks.empty()) throw std::invalid_argument("new_group: no ranks given");
  if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end())
    throw std::invalid_argument("new_group: rank " +
                                std::to_string(*std::adjacent_find(ranks.begin(), ranks.end())) +
                                " is listed twice");
  if (ranks.front() < 0 || ranks.back() >= get_world_size())
    throw std::invalid_argument("new_group: ranks must lie in [0, " +
                                std::to_string(get_world_size()) + "), got " +
                                detail::join_ranks(ranks));
  return ProcessGroup(std::move(ranks));
}

void barrier() { world_group().barrier(); }
void all_reduce(Tensor& tensor) { world_group().all_reduce(tensor); }

void destroy_process_group() {
  auto& slot = detail::cluster_slot();
  if (!slot) return;
  caf::actor_system& system = process_actor_system();
  if (slot->self_actor) {
    if (slot->port) system.middleman().unpublish(slot->self_actor, slot->port);
    caf::anon_send_exit(slot->self_actor, caf::exit_reason::user_shutdown);
  }
  slot.reset();
}

std::vector<Device> local_devices() {
  int n = cuda_device_count();
  if (n == 0) return {cpu()};
  return {Device(DeviceType::CUDA, get_local_rank() % n)};
}

}  // namespace tensorplay::distributed

namespace tensorplay::pipelining {

PipelineStage build_stage(const Pipe& pipe, int stage_index, Device device,
                          const distributed::ProcessGroup& group) {
  PipelineStage stage = build_stage(pipe, stage_index, device);
  stage.set_group_ranks(group.ranks());
  return stage;
}

std::vector<std::shared_ptr<PipelineStage>> build_stages(const Pipe& pipe,
                                                         const std::vector<int>& stage_indices,
                                                         Device device,
                                                         const distributed::ProcessGroup& group) {
  std::vector<std::shared_ptr<PipelineStage>> out;
  for (int s : stage_indices)
    out.push_back(std::make_shared<PipelineStage>(build_stage(pipe, s, device, group)));
  return out;
}

}  // namespace tensorplay::pipelining
