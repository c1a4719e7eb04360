// How the NCCL channel lays its traffic out, apart from NCCL: one link per (direction, peer), each
// a two-rank communicator with its own stream, and the bounded CTA budget of every communicator.
#pragma once

#include <algorithm>
#include <vector>

namespace tensorplay::transport::detail {

/// Forward and backward traffic.
constexpr int kDirections = 2;

/// The slot of the link carrying `direction`'s traffic (0 forward, 1 backward) between this rank
/// and `peer`. Transfers on one link complete in issue order; transfers on different links never
/// wait on each other, neither on the host nor on the GPU (NCCL serialises all work of one
/// communicator, whatever the stream, so a link is a communicator of its own, not only a stream).
inline int link_index(int direction, int peer, int world_size) {
  return direction * world_size + peer;
}

/// Number of link slots of a group (the slot of a rank with itself stays empty).
inline int link_slots(int world_size) { return kDirections * world_size; }

/// A pair of ranks, low < high.
struct LinkPair {
  int low;
  int high;
};

/// Every pair of a group in the one order all ranks split and connect their links in: ranks block
/// only on pairs they belong to, and a common order means no two ranks wait on each other in turn.
inline std::vector<LinkPair> link_pairs(int world_size) {
  std::vector<LinkPair> pairs;
  for (int low = 0; low < world_size; ++low)
    for (int high = low + 1; high < world_size; ++high) pairs.push_back({low, high});
  return pairs;
}

/// True when `rank` is one of the pair.
inline bool in_pair(const LinkPair& pair, int rank) {
  return rank == pair.low || rank == pair.high;
}

/// The other rank of a pair `rank` is in.
inline int other_in_pair(const LinkPair& pair, int rank) {
  return rank == pair.low ? pair.high : pair.low;
}

/// The rank of `rank` inside the pair's two-rank communicator (the split keeps the group's order).
inline int rank_in_pair(const LinkPair& pair, int rank) { return rank == pair.low ? 0 : 1; }

/// Blocks (CTAs) one NCCL communicator may use so that every communicator of a process fits on the
/// GPU at once: `communicators` of them (2 x (world - 1) links plus the data-parallel all-reduce)
/// share half the `sm_count` multiprocessors, at least one each and at most 16 each. NCCL kernels
/// spin until their peer is there; when kernels of several communicators, issued in different
/// orders on different ranks, cannot all be resident, one can wait forever on another.
inline int max_ctas_per_communicator(int sm_count, int communicators) {
  if (communicators < 1) communicators = 1;
  return std::clamp(sm_count / 2 / communicators, 1, 16);
}

}  // namespace tensorplay::transport::detail
