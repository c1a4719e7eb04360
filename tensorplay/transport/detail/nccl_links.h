// How the NCCL channel lays its traffic out, apart from NCCL: one link per (direction, sender,
// receiver), each a two-rank communicator with its own stream, and the CTA budget of each.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace tensorplay::transport::detail {

/// Forward and backward traffic.
constexpr int kDirections = 2;

/// The slot of the link carrying `direction`'s traffic (0 forward, 1 backward) from this rank to
/// `peer` (`sending`) or from `peer` to this rank. A link carries one way only, so its sends and
/// receives match in issue order whatever the placement (two ranks sending to each other in one
/// direction use two links). Transfers on one link complete in issue order; transfers on
/// different links never wait on each other, neither on the host nor on the GPU (NCCL serialises
/// all work of one communicator whatever the stream, so a link is a communicator of its own).
inline int link_index(int direction, int peer, bool sending, int world_size) {
  return (direction * 2 + (sending ? 1 : 0)) * world_size + peer;
}

/// Number of link slots of a group (the slots of a rank with itself stay empty).
inline int link_slots(int world_size) { return kDirections * 2 * world_size; }

/// Number of links (communicators) one rank holds in a group of `world_size`.
inline int links_per_rank(int world_size) { return kDirections * 2 * (world_size - 1); }

/// A pair of ranks, low < high, and which way its link carries traffic.
struct LinkPair {
  int low;
  int high;
  bool low_sends;  ///< low -> high when true, high -> low otherwise
};

/// Every link of a group in the one order all ranks split and connect them in: ranks block only
/// on links they belong to, and a common order means no two ranks wait on each other in turn.
inline std::vector<LinkPair> link_pairs(int world_size) {
  std::vector<LinkPair> pairs;
  for (int low = 0; low < world_size; ++low)
    for (int high = low + 1; high < world_size; ++high) {
      pairs.push_back({low, high, true});
      pairs.push_back({low, high, false});
    }
  return pairs;
}

/// True when `rank` sends on the pair's link (it is in the pair).
inline bool sends_on(const LinkPair& pair, int rank) {
  return pair.low_sends ? rank == pair.low : rank == pair.high;
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
/// GPU at once: `communicators` of them (links_per_rank links plus the data-parallel all-reduce)
/// share half the `sm_count` multiprocessors, at least one each and at most 16 each. NCCL kernels
/// spin until their peer is there; when kernels of several communicators, issued in different
/// orders on different ranks, cannot all be resident, one can wait forever on another.
inline int max_ctas_per_communicator(int sm_count, int communicators) {
  if (communicators < 1) communicators = 1;
  return std::clamp(sm_count / 2 / communicators, 1, 16);
}

/// CUDA's hardware work queues per GPU: CUDA_DEVICE_MAX_CONNECTIONS, 8 unless set, at most 32.
inline constexpr int kDefaultHardwareQueues = 8;
inline constexpr int kMaxHardwareQueues = 32;

/// Streams of one rank that hold work at once while NCCL kernels spin: one per link, the
/// data-parallel all-reduce's, and the device's tensor stream the links wait on.
inline int streams_per_rank(int world_size) { return links_per_rank(world_size) + 2; }

/// Empty when `hardware_queues` work queues give each of a rank's streams its own; otherwise why
/// not and what to do. Streams beyond the queues share one: a kernel queued behind an NCCL kernel
/// spinning for its peer cannot start even with SMs free, and two ranks whose spinning kernels
/// wait on work so held by the other hang, whatever the CTA budget (max_ctas_per_communicator).
inline std::string hardware_queue_problem(int world_size, int hardware_queues) {
  const int need = streams_per_rank(world_size);
  if (need <= hardware_queues) return {};
  std::string text = "a group of " + std::to_string(world_size) + " ranks gives each rank " +
                     std::to_string(need) + " streams with NCCL or tensor work at once, but " +
                     "CUDA_DEVICE_MAX_CONNECTIONS=" + std::to_string(hardware_queues) +
                     " gives the GPU only that many hardware queues (streams sharing one can " +
                     "block each other's NCCL kernels for good)";
  if (need <= kMaxHardwareQueues)
    return text + "; set CUDA_DEVICE_MAX_CONNECTIONS=" + std::to_string(kMaxHardwareQueues) +
           " or leave it unset (tensorplay then sets it)";
  return text + "; more than " + std::to_string(kMaxHardwareQueues) +
         " cannot be had: use the UCX channel for a group this large";
}

}  // namespace tensorplay::transport::detail
