// The collectives' transfer keys: how ring_all_reduce names its transfers (call, phase, ring
// step and the group's stream), with the limits that follow from the bits, in one place.
#pragma once

#include <cstdint>
#include <string>

#include "tensorplay/transport/transfer_key.h"

namespace tensorplay::transport {

/// Which half of a ring all-reduce a transfer belongs to.
enum class RingPhase : uint8_t { ReduceScatter, AllGather };

/// A collective's key has this bit set; every other user of a channel keeps it clear (and
/// asserts so where it encodes its keys), so a collective's transfer never matches another's.
inline constexpr int kCollectiveSpaceBit = kKeyBits - 1;
/// Bits of the call number a key keeps: what a failed call leaves in a channel's queue matches
/// again only kCallWindow calls later.
inline constexpr int kCallBits = 26;
inline constexpr uint64_t kCallWindow = uint64_t{1} << kCallBits;
/// Bits of the ring step: a ring of n members takes steps 0 to n - 2 in each phase, and the last
/// value carries the status message.
inline constexpr int kRingStepBits = 7;
/// The most members a ring holds.
inline constexpr int kMaxRingMembers = 1 << kRingStepBits;
/// The ring step of the status message every member sends after its last step.
inline constexpr int kStatusRingStep = kMaxRingMembers - 1;
/// Bits of the stream above the channel's kStreamBits a key keeps, so that two groups whose
/// streams agree in their low kStreamBits bits still differ (streams differing in their low
/// kStreamBits + kGroupBits bits never collide).
inline constexpr int kGroupBits = 10;

static_assert(kCallBits + 1 + kRingStepBits + kGroupBits == kCollectiveSpaceBit,
              "a collective's fields fill the key below its space bit");
static_assert(kMaxRingMembers - 2 < kStatusRingStep, "ring steps stay below the status step");

/// The fields a collective's key carries.
struct CollectiveFields {
  uint64_t call = 0;  ///< the call number modulo 2^(kCallBits + 19) (the higher bits only name)
  RingPhase phase = RingPhase::ReduceScatter;
  int ring_step = 0;
  uint32_t group_bits = 0;  ///< the stream's bits kStreamBits to kStreamBits + kGroupBits - 1
  bool operator==(const CollectiveFields&) const = default;
};

/// The key of ring step `ring_step` (0 to kStatusRingStep) of `phase` of call `call` on
/// `stream`. Throws std::invalid_argument naming kMaxRingMembers for a step out of range.
TransferKey collective_key(uint32_t stream, uint64_t call, RingPhase phase, int ring_step);

/// True for keys collective_key makes.
bool is_collective_key(uint64_t key);

/// The fields of a key collective_key made.
CollectiveFields decode_collective_key(const TransferKey& key);

/// Throws std::invalid_argument (starting with `where`) when a ring of `members` members does
/// not fit its keys (more than kMaxRingMembers) or has none.
void check_ring_members(int members, const std::string& where);

}  // namespace tensorplay::transport
