// Process groups over CAF's middleman: init_process_group (the rendezvous itself is in
// rendezvous_join.cpp), collectives as contributions sent to every member's process actor.
#include "actors/process_group.h"

#include <algorithm>
#include <caf/io/all.hpp>

#include "actors/detail/caf_system.h"
#include "actors/detail/cluster.h"
#include "actors/detail/process_actor.h"
#include "actors/detail/rendezvous.h"
#include "actors/message_log.h"
#include "tensors/device_info.h"
#include "tensors/knobs.h"
#include "tensors/tensors.h"
#include "transport/collective_key.h"
#include "transport/ring_all_reduce.h"
#include "transport/ucx_channel.h"

namespace tensorplay::distributed {

using pipelining::detail::collective_atom;
using pipelining::detail::process_actor_system;

namespace detail {
namespace {

std::unique_ptr<Cluster>& cluster_slot() {
  static std::unique_ptr<Cluster> cluster;
  return cluster;
}

uint64_t group_hash(const std::vector<int>& ranks) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (int r : ranks) {
    h ^= static_cast<uint64_t>(r) + 1;
    h *= 1099511628211ULL;
  }
  // FNV-1a of a few small ranks leaves the high bits alike ([0, 1] and [1, 3] agreed in the ten
  // bits collective keys keep): mix every bit into every other (splitmix64's finalizer).
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

}  // namespace

// -- CollectiveInbox
// -----------------------------------------------------------------------------------------

std::map<int, Contribution> CollectiveInbox::take(uint64_t key, const std::vector<int>& from,
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
  // Consecutive schedules of one group differ in the low bits, which every channel tells apart
  // (transport::kStreamBits of them).
  return static_cast<uint32_t>(hash >> 32 << transport::kStreamBits) + ++streams_[hash];
}

uint32_t Cluster::collective_stream(const std::vector<int>& ranks) {
  const uint32_t stream = static_cast<uint32_t>(group_hash(ranks) >> 32 << transport::kStreamBits);
  // Two groups of this process whose streams agree in the bits a collective key keeps would
  // receive each other's transfers: refuse the second, naming both.
  const uint32_t kept = (stream >> transport::kStreamBits) & ((1u << transport::kGroupBits) - 1);
  std::lock_guard lock(seq_mutex_);
  auto [it, fresh] = collective_groups_.emplace(kept, ranks);
  if (!fresh && it->second != ranks)
    throw DistributedError("collectives on group " + join_ranks(ranks) + " and on group " +
                           join_ranks(it->second) +
                           " would share transfer keys (their ids agree in the " +
                           std::to_string(transport::kGroupBits) +
                           " bits a key keeps); run one of them on another group (new_group)");
  return stream;
}

uint64_t Cluster::next_collective_call(const std::vector<int>& ranks) {
  std::lock_guard lock(seq_mutex_);
  return ++calls_[group_hash(ranks)];
}

std::vector<Contribution> Cluster::exchange(const std::vector<int>& ranks, std::string bytes,
                                            std::vector<caf::actor> actors,
                                            const std::string& what) {
  return exchange(ranks, std::move(bytes), std::move(actors), what,
                  std::chrono::steady_clock::now() + timeout);
}

std::vector<Contribution> Cluster::exchange(const std::vector<int>& ranks, std::string bytes,
                                            std::vector<caf::actor> actors, const std::string& what,
                                            std::chrono::steady_clock::time_point deadline) {
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
  auto got = inbox->take(key, ranks, deadline, what + " on group " + join_ranks(ranks));
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

ProcessGroup::operator DeviceMesh() const {
  return DeviceMesh::over_ranks(ranks_, "pp", get_rank());
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
  transport::RingGroup ring{c.ucx.get(), ranks_, me, c.collective_stream(ranks_), c.timeout};
  Tensor summed = tensor.detach();
  try {
    transport::ring_all_reduce_staged(ring, c.next_collective_call(ranks_), summed);
  } catch (const transport::TransferError& e) {
    throw DistributedError(where + " failed: " + e.what());
  }
}

// -- free functions
// --------------------------------------------------------------------------------

namespace {

/// Unpublishes this process's actor and stops it (its port is free again).
void leave(Cluster& c) {
  if (!c.self_actor) return;
  if (c.port) process_actor_system().middleman().unpublish(c.self_actor, c.port);
  caf::anon_send_exit(c.self_actor, caf::exit_reason::user_shutdown);
  c.self_actor = nullptr;
}

void check_options(const InitOptions& options) {
  if (Cluster::current())
    throw DistributedError(
        "init_process_group: already initialized; call destroy_process_group() first");
  if (options.backend != "ucx" && options.backend != "nccl" && options.backend != "auto")
    throw std::invalid_argument("init_process_group: backend '" + options.backend +
                                "' is not one of \"ucx\", \"nccl\", \"auto\"");
  if (options.timeout && options.timeout->count() <= 0)
    throw std::invalid_argument("init_process_group: timeout must be positive, got " +
                                std::to_string(options.timeout->count()) + " ms");
}

}  // namespace

void init_process_group(const InitOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  check_options(options);
  auto c = std::make_unique<Cluster>();
  c->env = options.env ? *options.env : read_launch_env();
  set_ranks_on_host(c->env.local_world_size);  // each rank its share of the host's cores
  c->timeout = options.timeout.value_or(kDefaultTimeout);
  c->backend = options.backend == "auto" ? (cuda_available() ? "nccl" : "ucx") : options.backend;
  if (c->env.world_size > 1) {
    // The rendezvous: .timeout where given, else the launcher's TENSORPLAY_RDZV_TIMEOUT.
    const auto timeout = options.timeout.value_or(c->env.rdzv_timeout.value_or(kDefaultTimeout));
    c->ucx = std::make_shared<transport::UcxChannel>(c->env.rank, c->env.world_size);
    try {
      detail::connect_to_job(*c, detail::RdzvDeadline{timeout, start + timeout});
    } catch (...) {
      leave(*c);
      throw;
    }
  } else {
    c->peers.resize(1);
    c->peers[0].host = detail::host_name();
  }
  // The job id every rank's message log records: the launcher's; for ranks started by hand, one
  // they all derive from rank 0's process; alone, this process's own.
  std::string job_id = c->env.job_id;
  if (job_id.empty() && c->env.world_size > 1 && c->peers.at(0).actor) {
    uint64_t h = 1469598103934665603ULL;  // FNV-1a of rank 0's node id (its host and process)
    for (char ch : to_string(c->peers[0].actor.node()))
      h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ULL;
    job_id = "rank0-" + std::to_string(h);
  }
  pipelining::set_log_job(job_id, c->env.rank, c->env.world_size, c->env.restart_count);
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
  leave(*slot);
  slot.reset();
}

std::vector<Device> local_devices() {
  int n = cuda_device_count();
  if (n == 0) return {cpu()};
  return {Device(DeviceType::CUDA, get_local_rank() % n)};
}

}  // namespace tensorplay::distributed
