// TransferKey: what names a transfer on a channel, opaque to the channel. Each user of a channel
// encodes its own fields into keys, in a header of its own (collective_key.h for collectives).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tensorplay::transport {

/// Bits of a stream every channel tells apart: two streams that differ in their low
/// kStreamBits bits never match each other's transfers (a user whose streams may agree there
/// folds more of its stream into its keys).
inline constexpr int kStreamBits = 4;
/// Bits of a key every channel tells apart: keys that differ in their low kKeyBits bits never
/// match each other. The bits above travel nowhere but may name the key (TransferKey::namer).
inline constexpr int kKeyBits = 45;
/// Bits the channel owns for the index of a tensor within a transfer.
inline constexpr int kIndexBits = 15;
/// The most tensors one transfer carries.
inline constexpr size_t kMaxTransferTensors = size_t{1} << kIndexBits;
static_assert(kStreamBits + kKeyBits + kIndexBits == 64, "a UCX tag holds the three");

/// Ordering lanes: channels that deliver a peer's transfers in the order they were sent (NCCL)
/// keep one order per lane, so transfers on different lanes never wait behind each other.
inline constexpr int kLanes = 2;

struct TransferKey;
/// Names a key for messages, in its user's terms (what the fields of the key mean).
using KeyNamer = std::string (*)(const TransferKey& key);

/// Names one transfer: the stream (one user's traffic on a shared channel: a schedule, a group's
/// collectives) and a key within it. Channels match a receive to a send by stream and key.
struct TransferKey {
  uint32_t stream = 0;
  uint64_t key = 0;
  uint8_t lane = 0;          ///< 0 to kLanes - 1 (see kLanes)
  KeyNamer namer = nullptr;  ///< how errors name it; null: "stream S key K"
  /// Equal when stream and key are (lane and namer follow from them).
  bool operator==(const TransferKey& o) const { return stream == o.stream && key == o.key; }
};

/// The key's name for messages: its namer's, else "stream S key 0x...".
std::string to_string(const TransferKey& key);

/// A hash of (stream, key), for tables of transfers.
struct TransferKeyHash {
  size_t operator()(const TransferKey& k) const {
    return static_cast<size_t>(k.key * 0x9e3779b97f4a7c15ULL ^ k.stream);
  }
};

}  // namespace tensorplay::transport
