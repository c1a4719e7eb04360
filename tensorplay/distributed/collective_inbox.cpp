// The job's membership and the collectives' inbox: contributions put and held until the members
// are known, which processes are admitted (they hold the cluster token), and intruders reported.
#include <caf/io/all.hpp>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "tensorplay/distributed/detail/group_runtime.h"
#include "tensorplay/distributed/detail/rendezvous.h"
#include "tensorplay/observe/message_log.h"

namespace tensorplay::distributed::detail {

void CollectiveInbox::put(Contribution c) {
  {
    std::lock_guard lock(mutex_);
    got_[c.key][c.source] = std::move(c);
  }
  cv_.notify_all();
}

void CollectiveInbox::admit(const caf::node_id& node) {
  std::lock_guard lock(mutex_);
  members_.insert(node);
}

bool CollectiveInbox::admitted(const caf::node_id& node) {
  std::lock_guard lock(mutex_);
  return members_.count(node) > 0;
}

bool CollectiveInbox::hold(const caf::node_id& node, Contribution& c) {
  constexpr size_t kMaxHeld = 1024;
  std::lock_guard lock(mutex_);
  if (members_known_ || held_.size() >= kMaxHeld) return false;
  held_.emplace_back(node, std::move(c));
  return true;
}

std::vector<caf::node_id> CollectiveInbox::release_held() {
  std::vector<std::pair<caf::node_id, Contribution>> held;
  {
    std::lock_guard lock(mutex_);
    members_known_ = true;
    held.swap(held_);
  }
  std::vector<caf::node_id> strangers;
  for (auto& [node, c] : held) {
    if (admitted(node))
      put(std::move(c));
    else
      strangers.push_back(node);
  }
  return strangers;
}

bool from_member(const caf::strong_actor_ptr& sender, const caf::node_id& here,
                 CollectiveInbox& members) {
  if (!sender) return false;
  return sender->node() == here || members.admitted(sender->node());
}

void report_intruder(caf::actor_system& system, int rank, const caf::node_id& node,
                     const std::string& what) {
  static std::mutex mutex;
  static std::map<caf::node_id, int> reported;
  {
    std::lock_guard lock(mutex);
    if (++reported[node] > 5) return;  // a flood is reported once, not line by line
  }
  auto report = [rank, what](const std::string& from) {
    std::fprintf(stderr,
                 "tensorplay: rank %d dropped %s from %s: not a member of this job (no "
                 "or wrong cluster token, TENSORPLAY_CLUSTER_TOKEN)\n",
                 rank, what.c_str(), from.c_str());
    pipelining::log_event(rank, 0, "refused", what + " from " + from);
  };
  if (node == caf::node_id()) {
    report("an unknown sender");
    return;
  }
  // The middleman knows the address of every node it has a connection to.
  caf::scoped_actor self{system};
  self->request(system.middleman().actor_handle(), std::chrono::seconds(1), caf::get_atom::value,
                node)
      .receive(
          [&](const caf::node_id&, const std::string& host, uint16_t port) {
            report(host.empty()
                       ? "node " + to_string(node)
                       : host + ":" + std::to_string(port) + " (node " + to_string(node) + ")");
          },
          [&](const caf::error&) { report("node " + to_string(node)); });
}

void CollectiveInbox::peer_down(int rank, const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    down_[rank] = why;
  }
  cv_.notify_all();
}

void CollectiveInbox::transport_down(int rank, const std::string& why) {
  std::function<void(int, const std::string&)> hook;
  {
    std::lock_guard lock(mutex_);
    hook = on_down_;
  }
  if (hook) hook(rank, why);
}

void CollectiveInbox::on_peer_down(std::function<void(int, const std::string&)> hook) {
  std::lock_guard lock(mutex_);
  on_down_ = std::move(hook);
}

void CollectiveInbox::on_stream_failure(uint32_t stream, StreamFailure hook) {
  std::lock_guard lock(failure_mutex_);
  if (hook)
    failure_hooks_[stream] = std::move(hook);
  else
    failure_hooks_.erase(stream);
}

void CollectiveInbox::stream_failed(uint32_t stream, uint64_t step, int rank,
                                    const std::string& why) {
  std::lock_guard lock(failure_mutex_);
  if (auto it = failure_hooks_.find(stream); it != failure_hooks_.end())
    it->second(step, rank, why);
}

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

}  // namespace tensorplay::distributed::detail
