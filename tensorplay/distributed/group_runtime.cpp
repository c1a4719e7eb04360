// A rank's runtime in a job: leaving (joining is in rendezvous_join.cpp, beside the rendezvous),
// the process's default one, and the collectives' bookkeeping (exchanges, streams, call numbers).
#include "tensorplay/distributed/detail/group_runtime.h"

#include <algorithm>
#include <caf/io/all.hpp>
#include <set>

#include "tensorplay/base/knobs.h"
#include "tensorplay/core/cpu_threads.h"
#include "tensorplay/core/detail/fnv1a.h"
#include "tensorplay/core/device_info.h"
#include "tensorplay/observe/message_log.h"
#include "tensorplay/transport/collective_key.h"
#include "tensorplay/transport/ucx_channel.h"
#include "tensorplay/wire/pipeline_tag.h"

namespace tensorplay::distributed::detail {

using pipelining::detail::collective_atom;

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return "[" + out + "]";
}

uint64_t group_hash(const std::vector<int>& ranks) {
  uint64_t h = tensorplay::detail::kFnvOffsetBasis;
  for (int r : ranks) h = tensorplay::detail::fnv1a64_mix(h, static_cast<uint64_t>(r) + 1);
  // FNV-1a of a few small ranks leaves the high bits alike ([0, 1] and [1, 3] agreed in the ten
  // bits collective keys keep): mix every bit into every other (splitmix64's finalizer).
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

// -- joining and leaving
// ---------------------------------------------------------------------------

GroupRuntime::~GroupRuntime() {
  close();
  // An own actor system stops here, its actors gone (close) and its threads joined; unless a
  // connection attempt still runs in it (a dial to a host that does not answer can block in the
  // kernel for minutes): then the system is left running, as the process's own always is.
  if (!own_system_) return;
  if (dials_in_flight_->load() > 0) {
    (void)own_system_.release();
    (void)own_config_.release();
    return;
  }
  table_.peers.clear();  // handles of its actors and proxies go before the system
  inbox_.reset();
  own_system_.reset();
  own_config_.reset();
}

void GroupRuntime::close() {
  if (closed_) return;
  closed_ = true;
  // News of table_.peers no longer reaches the transport: the process actor may still hear of ranks
  // leaving while the channel goes away.
  inbox_->on_peer_down(nullptr);
  if (table_.self_actor) {
    if (table_.port) system().middleman().unpublish(table_.self_actor, table_.port);
    caf::anon_send_exit(table_.self_actor, caf::exit_reason::user_shutdown);
    table_.self_actor = nullptr;
  }
  ucx_.reset();
}

void GroupRuntime::check_open(const std::string& what) const {
  if (closed_)
    throw DistributedError(what +
                           ": the group's job was left (destroy_process_group, or the "
                           "group's runtime closed); make the group again after joining");
}

namespace {

std::shared_ptr<GroupRuntime>& default_slot() {
  static std::shared_ptr<GroupRuntime> runtime;
  return runtime;
}

}  // namespace

GroupRuntime* default_runtime() { return default_slot().get(); }
std::shared_ptr<GroupRuntime> default_runtime_shared() { return default_slot(); }
void set_default_runtime(std::shared_ptr<GroupRuntime> runtime) {
  default_slot() = std::move(runtime);
}

std::shared_ptr<GroupRuntime> shared_runtime_of(const DeviceMesh& mesh) {
  if (!mesh.job()) return default_slot();
  return std::static_pointer_cast<GroupRuntime>(std::const_pointer_cast<void>(mesh.job()));
}

GroupRuntime* runtime_of(const DeviceMesh& mesh) { return shared_runtime_of(mesh).get(); }

std::shared_ptr<const void> job_of(const std::shared_ptr<GroupRuntime>& runtime) {
  if (!runtime || runtime == default_slot()) return nullptr;
  return runtime;
}

// -- collectives' bookkeeping
// ----------------------------------------------------------------------

std::string GroupRuntime::describe(int rank) const {
  if (rank >= 0 && rank < static_cast<int>(table_.peers.size()) && !table_.peers[rank].host.empty())
    return "rank " + std::to_string(rank) + " (" + table_.peers[rank].host + ")";
  return "rank " + std::to_string(rank);
}

void GroupRuntime::notify_stream_failure(const std::vector<int>& ranks, uint32_t stream,
                                         uint64_t step, const std::string& why) {
  for (int r : ranks)
    if (r != env_.rank && r >= 0 && r < static_cast<int>(table_.peers.size()) &&
        table_.peers[r].actor)
      caf::send_as(table_.self_actor, table_.peers[r].actor,
                   pipelining::detail::dp_failed_atom::value, stream, step,
                   static_cast<int32_t>(env_.rank), why);
}

static_assert(GroupRuntime::kMaxGroupIds < (1u << pipelining::kPipelineGroupBits) &&
                  GroupRuntime::kMaxGroupIds < (1u << transport::kGroupBits),
              "a group's id fits the bits pipeline and collective keys keep of a stream");

uint32_t GroupRuntime::group_id(const std::vector<int>& ranks) {
  std::lock_guard agree(id_mutex_);
  if (auto it = group_ids_.find(ranks); it != group_ids_.end()) return it->second;
  // Each member says which ids it has given other groups; the group takes the smallest that
  // none of them has, the same on every member.
  std::string mine;
  for (const auto& [group, id] : group_ids_) mine.push_back(static_cast<char>(id));
  std::set<uint32_t> taken;
  for (const Contribution& c : exchange(ranks, mine, {}, "the id of group " + join_ranks(ranks)))
    for (char id : c.bytes) taken.insert(static_cast<unsigned char>(id));
  uint32_t id = 1;
  while (taken.count(id)) ++id;
  if (id > kMaxGroupIds)
    throw DistributedError("group " + join_ranks(ranks) + ": a member already takes part in " +
                           std::to_string(kMaxGroupIds) +
                           " groups, the most one process may; make fewer groups (new_group)");
  group_ids_.emplace(ranks, id);
  return id;
}

uint32_t GroupRuntime::next_stream(const std::vector<int>& ranks) {
  const uint32_t id = group_id(ranks);
  std::lock_guard lock(seq_mutex_);
  // Consecutive schedules of one group differ in the low bits, which every channel tells apart
  // (transport::kStreamBits of them); slot 0 is the group's collectives'.
  const uint32_t slots = (1u << transport::kStreamBits) - 1;
  const uint32_t slot = streams_[group_hash(ranks)]++ % slots + 1;
  return id << transport::kStreamBits | slot;
}

uint32_t GroupRuntime::collective_stream(const std::vector<int>& ranks) {
  return group_id(ranks) << transport::kStreamBits;
}

uint64_t GroupRuntime::next_collective_call(const std::vector<int>& ranks) {
  std::lock_guard lock(seq_mutex_);
  return ++calls_[group_hash(ranks)];
}

std::vector<Contribution> GroupRuntime::exchange(const std::vector<int>& ranks, std::string bytes,
                                                 std::vector<caf::actor> actors,
                                                 const std::string& what) {
  return exchange(ranks, std::move(bytes), std::move(actors), what,
                  std::chrono::steady_clock::now() + timeout_);
}

std::vector<Contribution> GroupRuntime::exchange(const std::vector<int>& ranks, std::string bytes,
                                                 std::vector<caf::actor> actors,
                                                 const std::string& what,
                                                 std::chrono::steady_clock::time_point deadline) {
  if (std::find(ranks.begin(), ranks.end(), env_.rank) == ranks.end())
    throw DistributedError(what + ": rank " + std::to_string(env_.rank) +
                           " is not a member of the group " + join_ranks(ranks));
  uint64_t hash = group_hash(ranks);
  uint32_t seq;
  {
    std::lock_guard lock(seq_mutex_);
    seq = ++seq_[hash];
  }
  uint64_t key = (hash << 32) ^ seq;
  Contribution mine{key, env_.rank, std::move(bytes), std::move(actors)};
  for (int r : ranks)
    if (r != env_.rank)
      caf::send_as(table_.self_actor, table_.peers.at(r).actor, collective_atom::value, mine);
  inbox_->put(std::move(mine));
  auto got = inbox_->take(key, ranks, deadline, what + " on group " + join_ranks(ranks));
  std::vector<Contribution> out;
  for (int r : ranks) out.push_back(std::move(got.at(r)));
  return out;
}

}  // namespace tensorplay::distributed::detail
