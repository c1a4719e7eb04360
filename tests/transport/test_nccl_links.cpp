// The NCCL channel's link layout (tensorplay/transport/detail/nccl_links.h) without a GPU: a model
// of NCCL's queues shows the deadlocks of one queue per direction (skip connections) and of one per
// peer (V placements), and that one link per (direction, sender, receiver) runs the same traffic
// through; link order and the CTA budget.
#include <catch2/catch.hpp>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "tensorplay/transport/detail/nccl_links.h"

namespace {

namespace detail = tensorplay::transport::detail;

// One NCCL call of a rank: a send to or receive from `peer` in `direction`.
struct Op {
  bool send;
  int peer;
  int direction;
};

// Which queue (communicator and stream) of a rank an op goes to.
using Assign = std::function<int(const Op&, int world)>;

// NCCL's semantics for large transfers: every queue runs its ops in order, and a send completes
// only together with the matching receive, each at the head of its queue. Every rank issues its
// whole program at once (the host never waits). True when everything completes; false when the
// queues wait on each other for ever.
bool runs_through(const std::vector<std::vector<Op>>& programs, const Assign& assign) {
  const int world = static_cast<int>(programs.size());
  // queues[rank][queue] holds the ops in issue order.
  std::vector<std::map<int, std::deque<Op>>> queues(world);
  size_t left = 0;
  for (int r = 0; r < world; ++r)
    for (const Op& op : programs[r]) {
      queues[r][assign(op, world)].push_back(op);
      ++left;
    }
  bool progress = true;
  while (left > 0 && progress) {
    progress = false;
    for (int r = 0; r < world && !progress; ++r) {
      for (auto& [q, ops] : queues[r]) {
        if (ops.empty() || !ops.front().send) continue;
        const Op send = ops.front();
        auto& peer_queues = queues[send.peer];
        int peer_queue = assign(Op{false, r, send.direction}, world);
        auto it = peer_queues.find(peer_queue);
        if (it == peer_queues.end() || it->second.empty()) continue;
        const Op& head = it->second.front();
        if (head.send || head.peer != r || head.direction != send.direction) continue;
        ops.pop_front();
        it->second.pop_front();
        left -= 2;
        progress = true;
        break;
      }
    }
  }
  return left == 0;
}

// One queue per direction, whatever the peer (the channel before links).
int one_queue_per_direction(const Op& op, int /*world*/) { return op.direction; }
// One queue per (direction, peer), both ways in one (streams or communicators per peer).
int one_queue_per_peer(const Op& op, int world) { return op.direction * world + op.peer; }
// The channel's links.
int link_of(const Op& op, int world) {
  return detail::link_index(op.direction, op.peer, op.send, world);
}

}  // namespace

TEST_CASE("nccl links: a skip connection deadlocks one queue per direction, not the links") {
  // Stage 0 feeds stage 1 and, over a skip connection, stage 2; stage 2 gets its receives posted
  // in the order the descriptors came (from rank 1 first).
  std::vector<std::vector<Op>> programs = {
      {{true, 2, 0}, {true, 1, 0}},    // rank 0: skip to 2, then to 1
      {{false, 0, 0}, {true, 2, 0}},   // rank 1: from 0, then to 2
      {{false, 1, 0}, {false, 0, 0}},  // rank 2: from 1, then from 0
  };
  CHECK_FALSE(runs_through(programs, one_queue_per_direction));
  CHECK(runs_through(programs, link_of));
}

TEST_CASE("nccl links: a blocked send does not hold up a receive from another peer") {
  // Each rank's first transfer waits for a peer whose own first transfer is with someone else:
  // in one queue per direction the three wait on each other in a ring.
  std::vector<std::vector<Op>> programs = {
      {{true, 1, 1}, {true, 2, 1}},
      {{true, 2, 1}, {false, 0, 1}},
      {{false, 0, 1}, {false, 1, 1}},
  };
  CHECK_FALSE(runs_through(programs, one_queue_per_direction));
  CHECK(runs_through(programs, link_of));
}

TEST_CASE("nccl links: two ranks sending to each other in one direction need a link each way") {
  // A V placement: rank 0 holds stages 0 and 3, rank 1 stages 1 and 2; both send forward to the
  // other before posting the receive of what the other sends.
  std::vector<std::vector<Op>> programs = {
      {{true, 1, 0}, {false, 1, 0}},
      {{true, 0, 0}, {false, 0, 0}},
  };
  CHECK_FALSE(runs_through(programs, one_queue_per_direction));
  CHECK_FALSE(runs_through(programs, one_queue_per_peer));
  CHECK(runs_through(programs, link_of));
}

TEST_CASE("nccl links: a 1F1B-like pipeline of four ranks runs through on links") {
  std::vector<std::vector<Op>> programs(4);
  for (int mb = 0; mb < 6; ++mb) {
    for (int r = 0; r < 4; ++r) {
      if (r > 0) programs[r].push_back({false, r - 1, 0});
      if (r < 3) programs[r].push_back({true, r + 1, 0});
    }
    for (int r = 3; r >= 0; --r) {
      if (r < 3) programs[r].push_back({false, r + 1, 1});
      if (r > 0) programs[r].push_back({true, r - 1, 1});
    }
  }
  CHECK(runs_through(programs, link_of));
}

TEST_CASE("nccl links: every (direction, peer, way) has its own slot") {
  for (int world : {2, 3, 5, 8}) {
    std::set<int> slots;
    for (int d = 0; d < detail::kDirections; ++d)
      for (int peer = 0; peer < world; ++peer)
        for (bool sending : {false, true}) {
          int slot = detail::link_index(d, peer, sending, world);
          CHECK(slot >= 0);
          CHECK(slot < detail::link_slots(world));
          slots.insert(slot);
        }
    CHECK(static_cast<int>(slots.size()) == detail::link_slots(world));
    CHECK(detail::links_per_rank(world) == 4 * (world - 1));
  }
}

TEST_CASE("nccl links: links come in one order, each rank in 2 x (world - 1) of them") {
  auto pairs = detail::link_pairs(4);
  REQUIRE(pairs.size() == 12);
  CHECK(pairs.front().low == 0);
  CHECK(pairs.front().high == 1);
  CHECK(pairs.back().low == 2);
  CHECK(pairs.back().high == 3);
  for (int rank = 0; rank < 4; ++rank) {
    int member_of = 0;
    std::set<std::pair<int, bool>> seen;
    for (const auto& p : pairs) {
      CHECK(p.low < p.high);
      if (!detail::in_pair(p, rank)) continue;
      ++member_of;
      int peer = detail::other_in_pair(p, rank);
      // The peer sends exactly when this rank receives.
      CHECK(detail::sends_on(p, rank) != detail::sends_on(p, peer));
      CHECK(seen.insert({peer, detail::sends_on(p, rank)}).second);
      CHECK(detail::rank_in_pair(p, rank) != detail::rank_in_pair(p, peer));
    }
    CHECK(member_of == 6);
  }
  CHECK(detail::link_pairs(1).empty());
}

TEST_CASE("nccl links: the CTA budget of all communicators fits the GPU at once") {
  for (int sm_count : {132, 108, 80, 16}) {
    const int all_reduce = detail::max_ctas_per_communicator(sm_count, 2);
    for (int world = 2; world <= 16; ++world) {
      const int links = detail::links_per_rank(world);
      const int per_link = detail::max_ctas_per_communicator(sm_count, links + 1);
      INFO("sm " << sm_count << ", world " << world);
      CHECK(per_link >= 1);
      if (sm_count >= 2 * (links + 1) + all_reduce) {
        CHECK(links * per_link + all_reduce <= sm_count);
      }
    }
  }
  CHECK(detail::max_ctas_per_communicator(132, 3) == 16);
  CHECK(detail::max_ctas_per_communicator(132, 0) == 16);
}

TEST_CASE("nccl links: links sharing hardware queues deadlock again and the queue check says so") {
  // CUDA runs a GPU's streams on CUDA_DEVICE_MAX_CONNECTIONS hardware queues; streams past that
  // share one, in order, as one queue per direction did. The skip connection of the first case:
  std::vector<std::vector<Op>> programs = {
      {{true, 2, 0}, {true, 1, 0}},
      {{false, 0, 0}, {true, 2, 0}},
      {{false, 1, 0}, {false, 0, 0}},
  };
  auto on_queues = [](int queues) {
    return [queues](const Op& op, int world) { return link_of(op, world) % queues; };
  };
  CHECK(runs_through(programs, on_queues(detail::link_slots(3))));
  CHECK_FALSE(runs_through(programs, on_queues(1)));
  // So every rank's streams (its links, the all-reduce's and the tensor stream) need a queue each.
  CHECK(detail::streams_per_rank(2) == 6);
  CHECK(detail::streams_per_rank(3) == 10);
  CHECK(detail::hardware_queue_problem(2, detail::kDefaultHardwareQueues).empty());
  const std::string three = detail::hardware_queue_problem(3, detail::kDefaultHardwareQueues);
  CHECK_THAT(three, Catch::Contains("10 streams") &&
                        Catch::Contains("CUDA_DEVICE_MAX_CONNECTIONS=8") &&
                        Catch::Contains("set CUDA_DEVICE_MAX_CONNECTIONS=32"));
  for (int world = 2; world <= 8; ++world) {
    INFO("world " << world);
    CHECK(detail::hardware_queue_problem(world, detail::kMaxHardwareQueues).empty());
  }
  CHECK_THAT(detail::hardware_queue_problem(9, detail::kMaxHardwareQueues),
             Catch::Contains("use the UCX channel"));
}
