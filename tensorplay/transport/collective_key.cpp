// The collectives' key layout, within the kKeyBits a channel tells apart:
//   bit  44      1 (a collective's key)
//   bits 43..18  call modulo kCallWindow
//   bit  17      phase (1: all-gather)
//   bits 16..10  ring step
//   bits 9..0    stream bits kStreamBits to kStreamBits + kGroupBits - 1
// and above them (naming only) the call's higher bits.
#include "tensorplay/transport/collective_key.h"

#include <stdexcept>

namespace tensorplay::transport {
namespace {

constexpr int kGroupShift = 0;
constexpr int kStepShift = kGroupShift + kGroupBits;
constexpr int kPhaseShift = kStepShift + kRingStepBits;
constexpr int kCallShift = kPhaseShift + 1;
static_assert(kCallShift + kCallBits == kCollectiveSpaceBit);

constexpr uint64_t mask(int bits) { return (uint64_t{1} << bits) - 1; }

std::string name_collective(const TransferKey& key) {
  const CollectiveFields f = decode_collective_key(key);
  return "collective call " + std::to_string(f.call) +
         (f.phase == RingPhase::ReduceScatter ? " reduce-scatter" : " all-gather") + " ring step " +
         std::to_string(f.ring_step) + " on stream " + std::to_string(key.stream);
}

}  // namespace

TransferKey collective_key(uint32_t stream, uint64_t call, RingPhase phase, int ring_step) {
  if (ring_step < 0 || ring_step > kStatusRingStep)
    throw std::invalid_argument("collective_key: ring step " + std::to_string(ring_step) +
                                " is not in 0 to " + std::to_string(kStatusRingStep) +
                                " (a ring holds at most kMaxRingMembers = " +
                                std::to_string(kMaxRingMembers) + " members)");
  const uint64_t group = (stream >> kStreamBits) & mask(kGroupBits);
  const uint64_t all_gather = phase == RingPhase::AllGather ? 1 : 0;
  uint64_t key = uint64_t{1} << kCollectiveSpaceBit | (call & mask(kCallBits)) << kCallShift |
                 all_gather << kPhaseShift | static_cast<uint64_t>(ring_step) << kStepShift |
                 group << kGroupShift;
  key |= (call >> kCallBits) << kKeyBits;  // names the call; channels do not match on it
  return {stream, key, 0, &name_collective};
}

bool is_collective_key(uint64_t key) { return (key >> kCollectiveSpaceBit & 1) != 0; }

CollectiveFields decode_collective_key(const TransferKey& key) {
  CollectiveFields f;
  f.call = (key.key >> kCallShift & mask(kCallBits)) | (key.key >> kKeyBits) << kCallBits;
  f.phase = (key.key >> kPhaseShift & 1) != 0 ? RingPhase::AllGather : RingPhase::ReduceScatter;
  f.ring_step = static_cast<int>(key.key >> kStepShift & mask(kRingStepBits));
  f.group_bits = static_cast<uint32_t>(key.key >> kGroupShift & mask(kGroupBits));
  return f;
}

void check_ring_members(int members, const std::string& where) {
  if (members <= 0) throw std::invalid_argument(where + "the group has no members");
  if (members > kMaxRingMembers)
    throw std::invalid_argument(
        where + "the group has " + std::to_string(members) + " members; a ring holds at most " +
        std::to_string(kMaxRingMembers) + " (kMaxRingMembers: its keys number the ring steps in " +
        std::to_string(kRingStepBits) + " bits)");
}

}  // namespace tensorplay::transport
