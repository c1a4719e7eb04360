// Each rank's side of the rendezvous: its states (publish, hello, connect, clock, transport,
// barrier), all bounded by one deadline, and the addresses it gives the others.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <caf/io/all.hpp>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "tensorplay/core/detail/fnv1a.h"
#include "tensorplay/core/device_info.h"
#include "tensorplay/distributed/detail/process_actor.h"
#include "tensorplay/distributed/detail/rendezvous.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/transport/ucx_channel.h"
#include "tensorplay/wire/detail/caf_system.h"

namespace tensorplay::distributed::detail {
namespace {

using pipelining::detail::hello_atom;
using pipelining::detail::ping_atom;

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

/// Names this machine: processes with the same boot id share a kernel (and its shared memory),
/// whatever network namespace they are in.
std::string machine_id() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(boot, id);
  return id + "/" + host_name();
}

// -- the rendezvous, rank by rank
// --------------------------------------------------------------------
// The work of each state (RdzvState), each bounded by the one deadline of the rendezvous and
// failing with an error that names who was waited for.

/// How long a rank waits for rank 0's answer past its own deadline: rank 0 answers at that
/// deadline, naming the ranks that did not join; past this grace rank 0 itself is not answering.
constexpr auto kAnswerGrace = std::chrono::seconds(2);
/// How long rank 0 stays after a failed rendezvous, so its answers to the others leave.
constexpr auto kFarewell = std::chrono::milliseconds(200);

std::string prefix(const GroupRuntime& c) {
  return "init_process_group: rank " + std::to_string(c.env().rank);
}

/// remote_actor, waited for until the deadline at most: a connect to a host that does not answer
/// blocks in the kernel for minutes. An attempt left behind ends on its own thread (the runtime
/// keeps its actor system while one runs: dials_in_flight).
caf::expected<caf::actor> dial(GroupRuntime& c, const std::string& host, uint16_t port,
                               const RdzvDeadline& deadline) {
  using Result = caf::expected<caf::actor>;
  auto result = std::make_shared<std::promise<Result>>();
  std::future<Result> answer = result->get_future();
  ++*c.dials_in_flight();
  std::thread([system = &c.system(), in_flight = c.dials_in_flight(), host, port,
               result]() mutable {
    result->set_value(system->middleman().remote_actor(host, port));
    result.reset();  // an actor handle left in it goes while its system is still there
    --*in_flight;
  }).detach();
  if (answer.wait_until(deadline.at) == std::future_status::timeout)
    return caf::make_error(caf::sec::request_timeout);
  return answer.get();
}

/// Whether a process listens on `host`:`port` (a TCP connection there is accepted at once).
bool someone_listens(const std::string& host, int port) {
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host == "0.0.0.0" ? "127.0.0.1" : host.c_str(), &target.sin_addr) != 1)
    return false;  // a host name: left to the bind
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  const bool accepted = ::connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof target) == 0;
  ::close(fd);
  return accepted;
}

/// Why rank 0 may not listen on its port: another program, or another job's rank 0 (which says
/// which job it is when asked: its refusal of a hello from this job names it).
std::string port_taken(GroupRuntime& c, const std::string& host) {
  const LaunchEnv& env = c.env();
  std::string holder = "another program";
  RdzvDeadline probe{std::chrono::seconds(1),
                     std::chrono::steady_clock::now() + std::chrono::seconds(1)};
  const std::string at = host == "0.0.0.0" ? "127.0.0.1" : host;
  if (auto other = dial(c, at, static_cast<uint16_t>(env.master_port), probe)) {
    caf::scoped_actor self{c.system()};
    PeerEntry me;
    me.rank = env.rank;
    me.world_size = env.world_size;
    me.job = env.job_id;
    me.actor = c.self_actor();
    self->request(*other, std::chrono::seconds(2), hello_atom::value, me)
        .receive([&](std::vector<PeerEntry>&, std::string& why) { holder = why; },
                 [&](caf::error&) {});
    if (holder.rfind("rank 0 of job", 0) == 0)
      holder = holder.substr(0, holder.find(" refused"));
    else if (holder != "another program")
      holder = "another job's rank 0";
  }
  const std::string job = env.job_id.empty() ? "" : " of job " + env.job_id;
  return "; " + holder + " listens there already" +
         (env.port_derived ? " (port " + std::to_string(env.master_port) +
                                 " is derived from the job id" + job + ")"
                           : " (MASTER_PORT=" + std::to_string(env.master_port) + ")") +
         ": is MASTER_PORT in use? Set it to a free port for this job, the same on every rank";
}

/// Publishes this process's actor: rank 0 on MASTER_PORT (the rendezvous), others anywhere.
/// Rank 0's socket may share its port with a socket still closing (a restart), and CAF shares it
/// with any listener (SO_REUSEPORT): a listener found there first is another job's.
void publish(GroupRuntime& c, JobTable& table, const std::string& my_host) {
  caf::actor_system& system = c.system();
  const LaunchEnv& env = c.env();
  uint16_t want = env.rank == 0 ? static_cast<uint16_t>(env.master_port) : 0;
  std::string bind = env.rank != 0             ? my_host
                     : env.listen_addr.empty() ? env.master_addr
                                               : env.listen_addr;
  const std::string where = prefix(c) + " could not listen on " + bind + ":" + std::to_string(want);
  if (env.rank == 0 && someone_listens(bind, want))
    throw DistributedError(where + port_taken(c, bind));
  const char* bind_at = bind == "0.0.0.0" ? nullptr : bind.c_str();
  auto published = system.middleman().publish(c.self_actor(), want, bind_at, env.rank == 0);
  if (!published)
    throw DistributedError(where + " (" + system.render(published.error()) + ")" +
                           (env.rank == 0 ? port_taken(c, bind) : ""));
  table.port = *published;
}

/// Rank 0's process actor, dialled until the deadline (rank 0 may start later than the others).
caf::actor reach_rank0(GroupRuntime& c, const RdzvDeadline& deadline) {
  if (c.env().rank == 0) return c.self_actor();
  caf::actor_system& system = c.system();
  const LaunchEnv& env = c.env();
  for (;;) {
    auto r = dial(c, env.master_addr, static_cast<uint16_t>(env.master_port), deadline);
    if (r) return *r;
    if (deadline.passed())
      throw DistributedError(prefix(c) + " could not reach rank 0 at " + env.master_addr + ":" +
                             std::to_string(env.master_port) + " within " +
                             deadline.of_rank(env.rank) + ": " + system.render(r.error()) +
                             "; is rank 0 running, and are MASTER_ADDR/MASTER_PORT right?");
    std::this_thread::sleep_for(std::min(std::chrono::milliseconds(50), deadline.left()));
  }
}

PeerEntry my_entry(const GroupRuntime& c, const std::string& my_host,
                   const RdzvDeadline& deadline) {
  PeerEntry me;
  me.rank = c.env().rank;
  me.world_size = c.env().world_size;
  me.host = c.env().rank == 0 ? c.env().master_addr : my_host;
  me.machine = machine_id();
  me.port = c.port();
  me.token = c.env().cluster_token;
  me.job = c.env().job_id;
  me.actor = c.self_actor();
  me.timeout_ms = deadline.timeout.count();
  if (c.ucx()) {
    auto address = c.ucx()->address();
    me.ucx.assign(address.begin(), address.end());
  }
  return me;
}

/// Says hello to rank 0 and waits for the table of every rank; rank 0 answers at once when it
/// refuses a rank, or at the first joined rank's deadline, naming who did not join.
std::vector<PeerEntry> say_hello(GroupRuntime& c, caf::actor root, PeerEntry me,
                                 const RdzvDeadline& deadline) {
  caf::actor_system& system = c.system();
  caf::scoped_actor self{system};
  std::vector<PeerEntry> table;
  std::string failed;
  me.wait_ms = deadline.left().count();
  self->request(root, deadline.left() + kAnswerGrace, hello_atom::value, me)
      .receive(
          [&](std::vector<PeerEntry>& t, std::string& why) {
            table = std::move(t);
            failed = std::move(why);
          },
          [&](caf::error& e) {
            failed = "rank " + std::to_string(c.env().rank) + " got no answer from rank 0 at " +
                     c.env().master_addr + ":" + std::to_string(c.env().master_port) + " within " +
                     deadline.of_rank(c.env().rank) + " (" + system.render(e) +
                     "): rank 0 is gone or stopped";
          });
  if (!failed.empty()) {
    if (c.env().rank == 0) std::this_thread::sleep_for(kFarewell);
    throw DistributedError("init_process_group: " + failed);
  }
  if (static_cast<int>(table.size()) != c.env().world_size)
    throw DistributedError("init_process_group: rank 0 answered with " +
                           std::to_string(table.size()) + " ranks, expected " +
                           std::to_string(c.env().world_size));
  return table;
}

/// Takes rank 0's table: admits its processes, ends a gone peer's transfers at once, reports
/// contributions held from processes that are not in it.
void adopt_table(GroupRuntime& c, JobTable& job, std::vector<PeerEntry> table) {
  job.peers = std::move(table);
  // Rank 0 vouches for every process in its table: they all presented the token.
  for (const PeerEntry& p : c.peers())
    if (p.actor) c.inbox()->admit(p.actor.node());
  // A peer's process gone: its transfers end now, not at their timeouts (receives fail naming
  // it, sends are dropped). Holds the channel weakly: the hook may run while the group closes.
  std::vector<std::string> names;
  for (int r = 0; r < c.env().world_size; ++r) names.push_back(c.describe(r));
  c.inbox()->on_peer_down([channel = std::weak_ptr<transport::Channel>(c.ucx()), names](
                              int rank, const std::string& why) {
    if (auto ucx = channel.lock(); ucx && rank >= 0 && rank < static_cast<int>(names.size()))
      ucx->drop_peer(rank, names[rank] + " is gone: " + why);
  });
  for (const caf::node_id& stranger : c.inbox()->release_held())
    report_intruder(c.system(), c.env().rank, stranger, "a collective contribution");
}

/// Direct connections: each rank dials the ranks below it (rank 0 is already connected), so
/// every pair has exactly one connection and control messages never hop through rank 0.
void dial_lower_ranks(GroupRuntime& c, const RdzvDeadline& deadline) {
  caf::actor_system& system = c.system();
  for (int j = 1; j < c.env().rank; ++j) {
    const PeerEntry& p = c.peers()[j];
    if (deadline.passed())
      throw DistributedError(prefix(c) + " ran out of " + deadline.of_rank(c.env().rank) +
                             " before connecting to " + c.describe(j));
    auto r = dial(c, p.host, p.port, deadline);
    if (!r)
      throw DistributedError(prefix(c) + " could not connect to " + c.describe(j) + " at " +
                             p.host + ":" + std::to_string(p.port) + " within " +
                             deadline.of_rank(c.env().rank) + ": " + system.render(r.error()));
  }
  caf::scoped_actor self{system};
  for (int j = 0; j < c.env().world_size; ++j)
    if (j != c.env().rank) self->send(c.self_actor(), watch_atom::value, c.peers()[j].actor, j);
}

/// Clock offset to rank 0: the sample with the shortest round trip of a few.
void measure_clock(GroupRuntime& c, JobTable& table, const RdzvDeadline& deadline) {
  if (c.env().rank == 0) return;
  caf::actor_system& system = c.system();
  caf::scoped_actor self{system};
  int64_t best_rtt = INT64_MAX;
  for (int i = 0; i < 8; ++i) {
    int64_t t0 = steady_now_us();
    self->request(c.peers()[0].actor, deadline.left(), ping_atom::value)
        .receive(
            [&](int64_t remote) {
              int64_t t1 = steady_now_us();
              if (t1 - t0 < best_rtt) {
                best_rtt = t1 - t0;
                table.clock_offset_us = remote - (t0 + t1) / 2;
              }
            },
            [&](caf::error& e) {
              throw DistributedError(
                  "init_process_group: rank 0 did not answer a clock sample "
                  "of rank " +
                  std::to_string(c.env().rank) + " within " + deadline.of_rank(c.env().rank) +
                  " (" + system.render(e) + ")");
            });
  }
}

void connect_transport(GroupRuntime& c, const std::string& my_machine) {
  if (!c.ucx()) return;
  std::vector<std::vector<uint8_t>> addresses;
  std::vector<bool> same_host;
  for (const PeerEntry& p : c.peers()) {
    addresses.emplace_back(p.ucx.begin(), p.ucx.end());
    same_host.push_back(p.machine == my_machine);
  }
  c.ucx()->connect(addresses, same_host);
}

/// One rank's way through the rendezvous's states.
class RankRendezvous {
 public:
  RankRendezvous(GroupRuntime& c, JobTable& table, const RdzvDeadline& deadline)
      : c_(c),
        table_(table),
        deadline_(deadline),
        my_host_(local_address_towards(c.env().master_addr, c.env().master_port)) {}

  void run(RdzvState state) {
    switch (state) {
      case RdzvState::kPublish:
        publish(c_, table_, my_host_);
        me_ = my_entry(c_, my_host_, deadline_);
        return;
      case RdzvState::kHello:
        adopt_table(c_, table_, say_hello(c_, reach_rank0(c_, deadline_), me_, deadline_));
        return;
      case RdzvState::kConnect:
        return dial_lower_ranks(c_, deadline_);
      case RdzvState::kClock:
        return measure_clock(c_, table_, deadline_);
      case RdzvState::kTransport:
        return connect_transport(c_, me_.machine);
      case RdzvState::kBarrier:
        return barrier();
    }
  }

 private:
  /// Everyone connected before anyone uses the group.
  void barrier() {
    std::vector<int> everyone(c_.env().world_size);
    for (int r = 0; r < c_.env().world_size; ++r) everyone[r] = r;
    c_.exchange(
        everyone, {}, {},
        "init_process_group (the closing barrier, within " + deadline_.of_rank(c_.env().rank) + ")",
        deadline_.at);
  }

  GroupRuntime& c_;
  JobTable& table_;  // c_'s, which the rendezvous fills
  const RdzvDeadline& deadline_;
  const std::string my_host_;
  PeerEntry me_;
};

std::mutex hook_mutex;
RdzvStateHook state_hook;

void enter(int rank, RdzvState state) {
  RdzvStateHook hook;
  {
    std::lock_guard lock(hook_mutex);
    hook = state_hook;
  }
  if (hook) hook(rank, state);
}

}  // namespace

const char* to_string(RdzvState state) {
  switch (state) {
    case RdzvState::kPublish:
      return "publish";
    case RdzvState::kHello:
      return "hello";
    case RdzvState::kConnect:
      return "connect";
    case RdzvState::kClock:
      return "clock";
    case RdzvState::kTransport:
      return "transport";
    case RdzvState::kBarrier:
      return "barrier";
  }
  return "?";
}

void set_rdzv_state_hook(RdzvStateHook hook) {
  std::lock_guard lock(hook_mutex);
  state_hook = std::move(hook);
}

void connect_to_job(GroupRuntime& c, const RdzvDeadline& deadline) {
  c.table_.self_actor = spawn_process_actor(c.system(), c.inbox(), c.env().world_size,
                                            c.env().cluster_token, c.env().rank, c.env().job_id);
  RankRendezvous rendezvous(c, c.table_, deadline);
  for (RdzvState state : kRdzvStates) {
    try {
      enter(c.env().rank, state);
      if (deadline.passed())
        throw DistributedError(prefix(c) + " ran out of " + deadline.of_rank(c.env().rank) +
                               " before its " + to_string(state) + " state");
      rendezvous.run(state);
    } catch (const DistributedError& e) {
      throw DistributedError(std::string(e.what()) + " (rendezvous state: " + to_string(state) +
                             ")");
    } catch (const transport::TransferError& e) {
      throw DistributedError(prefix(c) + ": " + e.what() +
                             " (rendezvous state: " + to_string(state) + ")");
    }
  }
}

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

namespace {

/// The job id every rank's message log records: the launcher's; for ranks started by hand, one
/// they all derive from rank 0's process; alone, this process's own.
std::string job_id_of(const GroupRuntime& c) {
  if (!c.env().job_id.empty() || c.env().world_size == 1 || !c.peers().at(0).actor)
    return c.env().job_id;
  // A hash of rank 0's node id (its host and process).
  return "rank0-" +
         std::to_string(tensorplay::detail::fnv1a64(to_string(c.peers()[0].actor.node())));
}

}  // namespace

std::shared_ptr<GroupRuntime> GroupRuntime::join(const InitOptions& options, bool own_system) {
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<GroupRuntime> c(new GroupRuntime());
  if (own_system) {
    c->own_config_ = pipelining::detail::make_actor_system_config();
    c->own_system_ = std::make_unique<caf::actor_system>(*c->own_config_);
    c->system_ = c->own_system_.get();
  } else {
    c->system_ = &pipelining::detail::process_actor_system();
  }
  c->env_ = options.env ? *options.env : read_launch_env();
  c->timeout_ = options.timeout.value_or(kDefaultTimeout);
  c->backend_ = options.backend == "auto" ? (cuda_available() ? "nccl" : "ucx") : options.backend;
  if (c->env_.world_size > 1) {
    // The rendezvous: .timeout where given, else the launcher's TENSORPLAY_RDZV_TIMEOUT.
    const auto timeout = options.timeout.value_or(c->env_.rdzv_timeout.value_or(kDefaultTimeout));
    c->ucx_ = std::make_shared<transport::UcxChannel>(c->env_.rank, c->env_.world_size);
    connect_to_job(*c, RdzvDeadline{timeout, start + timeout});  // on failure, c leaves
  } else {
    c->table_.peers.resize(1);
    c->table_.peers[0].host = host_name();
  }
  c->env_.job_id = job_id_of(*c);
  return c;
}

}  // namespace tensorplay::distributed::detail
