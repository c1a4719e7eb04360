// The ring all-reduce: sums a host tensor over the members of a group in place, as a
// reduce-scatter and an all-gather around a ring of Channel transfers (2(n-1) steps of 1/n each).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "tensorplay/core/tensor.h"
#include "tensorplay/transport/channel.h"
#include "tensorplay/transport/collective_key.h"

namespace tensorplay::transport {

/// The ring a collective runs on: the channel, the channel ranks of the members in group order
/// (at most kMaxRingMembers), this process's index among them, the stream keying its traffic, and
/// the longest one transfer may take.
struct RingGroup {
  Channel* channel = nullptr;
  std::vector<int> peers;
  int me = 0;
  uint32_t stream = 0;
  std::chrono::milliseconds timeout{120000};
};

/// Sums `flat` (a host tensor, float32 or bfloat16, any shape) in place over the members of
/// `group`. `call` numbers the call: every member passes the same number for the same call,
/// increasing per call on this stream (calls on one stream run one at a time). Every member ends
/// with the same bits, and the same inputs give the same bits from run to run: chunk c is summed
/// in ring order starting at member c, bfloat16 partial sums in float32 rounded once per step.
/// Each member sends to the next member and receives from the one before. Throws
/// std::invalid_argument for a bad group or tensor, and TransferError naming the member (and its
/// channel rank) when one did not deliver in time, passed a tensor of another size, dtype or
/// shape, or gave up (every member then fails with the first one's reason). After an error
/// `flat` holds unspecified values.
void ring_all_reduce(const RingGroup& group, uint64_t call, Tensor& flat);

/// ring_all_reduce for a tensor on any device: a device tensor is summed through a host copy
/// (UCX here moves host memory) and copied back. What every all-reduce over UCX calls: a process
/// group's, and the data-parallel buckets' when NCCL does not carry them.
void ring_all_reduce_staged(const RingGroup& group, uint64_t call, Tensor& tensor);

}  // namespace tensorplay::transport
