// The elastic rendezvous's rounds: membership, node order, start and end of each round, and the
// line format the launchers speak with the endpoint.
#include "rdzv_round.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace tensorplay::launch {

RoundKeeper::RoundKeeper(RdzvConfig config) : config_(std::move(config)) {
  if (config_.min_nodes < 1 || config_.max_nodes < config_.min_nodes)
    throw std::invalid_argument("--nnodes MIN:MAX needs 1 <= MIN <= MAX (got " +
                                std::to_string(config_.min_nodes) + ":" +
                                std::to_string(config_.max_nodes) + ")");
  if (!(config_.timeout_seconds > 0))
    throw std::invalid_argument("--rdzv-timeout must be positive");
}

std::string RoundKeeper::join(const JoinRequest& request, double now) {
  const std::string who = "node '" + request.node_id + "'";
  if (!error_.empty()) return error_;
  if (request.job_id != config_.job_id)
    return who + " asks for job '" + request.job_id + "', this rendezvous is for job '" +
           config_.job_id + "': pass the same --rdzv-id on every node";
  if (request.token != config_.token)
    return who +
           " presented another cluster token: set the same TENSORPLAY_CLUSTER_TOKEN on every node";
  if (request.nproc < 1)
    return who + " has no ranks (--nproc-per-node " + std::to_string(request.nproc) + ")";
  for (const auto& [id, other] : waiting_)
    if (id != request.node_id && other.nproc != request.nproc)
      return who + " starts " + std::to_string(request.nproc) + " ranks, node '" + id +
             "' starts " + std::to_string(other.nproc) +
             ": give every node the same --nproc-per-node";
  if (request.node_rank >= 0)
    for (const auto& [id, other] : waiting_)
      if (id != request.node_id && other.node_rank == request.node_rank)
        return who + " claims node rank " + std::to_string(request.node_rank) + ", which node '" +
               id + "' holds: give each node its own --node-rank (or none)";
  if (waiting_.empty() && !running_) gather_since_ = now;
  waiting_[request.node_id] = request;
  poll(now);
  return "";
}

void RoundKeeper::poll(double now) {
  if (running_ || !error_.empty() || waiting_.empty()) return;
  const int count = static_cast<int>(waiting_.size());
  if (count >= config_.max_nodes) return start_round();
  if (gather_since_ < 0 || now - gather_since_ < config_.timeout_seconds) return;
  if (count >= config_.min_nodes) return start_round();
  error_ = "only " + std::to_string(count) + " node" + (count == 1 ? "" : "s") + " joined round " +
           std::to_string(round_) + " within --rdzv-timeout " +
           std::to_string(static_cast<int>(config_.timeout_seconds)) + " s, at least " +
           std::to_string(config_.min_nodes) +
           " needed (--nnodes MIN:MAX): start more nodes or lower MIN";
}

void RoundKeeper::start_round() {
  std::vector<const JoinRequest*> order;
  for (const auto& [id, request] : waiting_) order.push_back(&request);
  // Node order: the nodes that named a node rank by it, then the others by node id.
  std::stable_sort(order.begin(), order.end(), [](const JoinRequest* a, const JoinRequest* b) {
    const bool ranked_a = a->node_rank >= 0, ranked_b = b->node_rank >= 0;
    if (ranked_a != ranked_b) return ranked_a;
    if (ranked_a) return a->node_rank < b->node_rank;
    return a->node_id < b->node_id;
  });
  if (static_cast<int>(order.size()) > config_.max_nodes) order.resize(config_.max_nodes);
  RoundAssignment round;
  round.round = round_;
  round.nnodes = static_cast<int>(order.size());
  for (const JoinRequest* request : order) {
    round.members.push_back(request->node_id);
    round.world_size += request->nproc;
  }
  members_.clear();
  int offset = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    RoundAssignment mine = round;
    mine.node_index = static_cast<int>(i);
    mine.rank_offset = offset;
    offset += order[i]->nproc;
    members_[order[i]->node_id] = mine;
    waiting_.erase(order[i]->node_id);
  }
  running_ = true;
  gather_since_ = -1;
}

void RoundKeeper::fail(const std::string& node_id, double now) {
  waiting_.erase(node_id);
  if (running_ && members_.count(node_id)) next_round(now);
}

void RoundKeeper::end_round(double now) {
  if (running_) next_round(now);
}

void RoundKeeper::next_round(double now) {
  running_ = false;
  members_.clear();
  ++round_;
  gather_since_ = now;
  if (round_ > config_.max_restarts)
    error_ = "round " + std::to_string(round_) + " would pass --max-restarts " +
             std::to_string(config_.max_restarts) + ": the job stops";
  poll(now);
}

std::optional<RoundAssignment> RoundKeeper::assignment(const std::string& node_id) const {
  auto it = members_.find(node_id);
  if (!running_ || it == members_.end()) return std::nullopt;
  return it->second;
}

bool RoundKeeper::wants_new_round() const {
  return running_ && !waiting_.empty() && static_cast<int>(members_.size()) < config_.max_nodes;
}

std::string format_join(const JoinRequest& r) {
  return "JOIN " + r.job_id + " " + r.node_id + " " +
         (r.node_rank >= 0 ? std::to_string(r.node_rank) : "-") + " " + std::to_string(r.nproc) +
         " " + r.token;
}

std::optional<JoinRequest> parse_join(const std::string& line, std::string& error) {
  std::istringstream in(line);
  std::string verb, rank, extra;
  JoinRequest r;
  if (!(in >> verb >> r.job_id >> r.node_id >> rank >> r.nproc >> r.token) || verb != "JOIN" ||
      (in >> extra)) {
    error = "not a JOIN line (JOIN <job> <node-id> <node-rank|-> <nproc> <token>)";
    return std::nullopt;
  }
  if (rank != "-") {
    if (rank.empty() || rank.size() > 6 ||
        rank.find_first_not_of("0123456789") != std::string::npos) {
      error = "node rank '" + rank + "' is not a whole number or '-'";
      return std::nullopt;
    }
    r.node_rank = std::stoi(rank);
  }
  return r;
}

std::string format_round(const RoundAssignment& r) {
  char line[128];
  std::snprintf(line, sizeof(line), "ROUND %d %d %d %d %d ", r.round, r.world_size, r.nnodes,
                r.node_index, r.rank_offset);
  return line + (r.master_addr.empty() ? std::string("-") : r.master_addr);
}

std::optional<RoundAssignment> parse_round(const std::string& line) {
  std::istringstream in(line);
  std::string verb, extra;
  RoundAssignment r;
  if (!(in >> verb >> r.round >> r.world_size >> r.nnodes >> r.node_index >> r.rank_offset >>
        r.master_addr) ||
      verb != "ROUND" || (in >> extra) || r.round < 0 || r.world_size < 1 || r.nnodes < 1 ||
      r.node_index < 0 || r.node_index >= r.nnodes || r.rank_offset < 0 ||
      r.rank_offset >= r.world_size)
    return std::nullopt;
  return r;
}

}  // namespace tensorplay::launch
