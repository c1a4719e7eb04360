// Rank 0's record of the rendezvous: the checks on each hello, the table once every rank joined,
// and the reasons it ends early (a refused rank, a rank whose wait ran out).
#include "tensorplay/distributed/detail/rendezvous.h"

#include <algorithm>
#include <utility>

namespace tensorplay::distributed::detail {

bool same_token(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

namespace {

std::string claimed(const PeerEntry& entry) {
  return "rank " + std::to_string(entry.rank) + (entry.host.empty() ? "" : " (" + entry.host + ")");
}

std::string named_job(const std::string& job) { return job.empty() ? "(no job id)" : job; }

std::string world_size_mismatch(const PeerEntry& entry, int world_size) {
  std::string out = "it was started with WORLD_SIZE=" + std::to_string(entry.world_size) +
                    ", rank 0 with WORLD_SIZE=" + std::to_string(world_size);
  if (entry.rank >= world_size)
    out += " (RANK=" + std::to_string(entry.rank) + " is out of range for rank 0's " +
           std::to_string(world_size) + " ranks)";
  return out + "; start every rank with the same WORLD_SIZE";
}

}  // namespace

RendezvousBook::RendezvousBook(int world_size, std::string token, std::string job)
    : world_size_(world_size), token_(std::move(token)), job_(std::move(job)) {}

std::string RendezvousBook::check(const PeerEntry& entry, bool actor_on_sender_node) const {
  if (entry.protocol != pipelining::detail::kRendezvousProtocol)
    return "it speaks rendezvous protocol " + std::to_string(entry.protocol) + ", rank 0 " +
           std::to_string(pipelining::detail::kRendezvousProtocol) +
           "; start every rank from the same build";
  if (!same_token(entry.token, token_))
    return std::string(entry.token.empty() ? "it presented no cluster token"
                                           : "it presented a different cluster token") +
           " (TENSORPLAY_CLUSTER_TOKEN) than rank 0; start every rank with the same "
           "TENSORPLAY_CLUSTER_TOKEN "
           "(tp-launch makes one per job)";
  if (!entry.actor || !actor_on_sender_node)
    return "its hello names a process actor on another node than its sender";
  if (entry.world_size != world_size_) return world_size_mismatch(entry, world_size_);
  if (entry.rank < 0 || entry.rank >= world_size_)
    return "RANK=" + std::to_string(entry.rank) +
           " is out of range for WORLD_SIZE=" + std::to_string(world_size_) + " (ranks 0 to " +
           std::to_string(world_size_ - 1) + ")";
  for (const PeerEntry& e : joined_)
    if (e.rank == entry.rank)
      return "rank " + std::to_string(entry.rank) + " joined already (from " + e.host +
             "); each process needs its own RANK";
  return {};
}

HelloOutcome RendezvousBook::hello(PeerEntry entry, bool actor_on_sender_node) {
  // A rank of another job is turned away alone: this job's rendezvous goes on.
  if (entry.job != job_)
    return {HelloOutcome::Kind::kRefuse,
            "rank 0 of job " + named_job(job_) + " refused " + claimed(entry) + " of job " +
                named_job(entry.job) +
                ": two jobs met on one rendezvous port; give each job its own MASTER_PORT (or "
                "leave it unset under srun and mpirun: the job id chooses one)",
            {}};
  if (!ended_.empty())
    return {HelloOutcome::Kind::kRefuse, "the rendezvous ended already: " + ended_, {}};
  const std::string why = check(entry, actor_on_sender_node);
  if (!why.empty()) {
    const std::string refusal = "rank 0 refused " + claimed(entry) + ": " + why;
    if (complete_) return {HelloOutcome::Kind::kRefuse, refusal, {}};
    ended_ = "the rendezvous ended: " + refusal + "; " + summary();
    return {HelloOutcome::Kind::kEnd, refusal, ended_};
  }
  joined_.push_back(std::move(entry));
  if (static_cast<int>(joined_.size()) < world_size_) return {};
  std::sort(joined_.begin(), joined_.end(),
            [](const PeerEntry& a, const PeerEntry& b) { return a.rank < b.rank; });
  complete_ = true;
  return {HelloOutcome::Kind::kComplete, {}, {}};
}

std::string RendezvousBook::expire(int rank) {
  if (!open()) return {};
  auto it = std::find_if(joined_.begin(), joined_.end(),
                         [rank](const PeerEntry& e) { return e.rank == rank; });
  if (it == joined_.end()) return {};
  ended_ = "the rendezvous did not complete within rank " + std::to_string(rank) +
           "'s timeout of " + std::to_string(it->timeout_ms) +
           " ms (TENSORPLAY_RDZV_TIMEOUT, tp-launch --rdzv-timeout, or init_process_group's "
           ".timeout): " +
           summary();
  return ended_;
}

std::string RendezvousBook::summary() const {
  std::vector<int> in, out;
  for (const PeerEntry& e : joined_) in.push_back(e.rank);
  for (int r = 0; r < world_size_; ++r)
    if (std::find(in.begin(), in.end(), r) == in.end()) out.push_back(r);
  std::sort(in.begin(), in.end());
  return "rank(s) " + join_ranks(out) + " of " + std::to_string(world_size_) +
         " did not join (joined: " + join_ranks(in) + ")";
}

}  // namespace tensorplay::distributed::detail
