// The messages that cross processes as bytes, and their one byte form: a versioned, little-endian
// layout per message kind, written by encode_message and read back by decode_message alone.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tensorplay/pipelining/tensor_meta.h"
#include "tensorplay/wire/notification.h"

namespace tensorplay::pipelining {

/// The protocol's version: the first byte of every message. A message of another version is
/// refused, naming both.
inline constexpr uint8_t kWireVersion = 2;

/// Limits a decoded message must respect (a count or size past them is refused, not allocated).
inline constexpr size_t kMaxWireTensors = 4096;          ///< descriptors in one notification
inline constexpr size_t kMaxWireDims = 16;               ///< dimensions of one shape
inline constexpr size_t kMaxWireStages = 1 << 16;        ///< stages in one rank's facts
inline constexpr size_t kMaxWireText = size_t{1} << 30;  ///< bytes of one text field

/// An error that crosses processes with its type: `type` names the library's error type or the
/// standard one it derives from ("ScheduleError", "invalid_argument", ...); empty: no error.
struct RemoteError {
  std::string type;
  std::string message;
  bool empty() const { return type.empty() && message.empty(); }
  bool operator==(const RemoteError&) const = default;
};

/// One rank's part of a schedule's construction meeting. Small: the pipe and the order travel as
/// hashes, their full text (RankDetail) only when the hashes differ.
struct RankFacts {
  RemoteError error;  ///< this rank's own reason to fail (nothing else is set then)
  std::string kind;   ///< the schedule's name
  int n_microbatches = 0;
  int num_stages = 0;
  int stages_per_rank = 0;
  bool has_loss = false;  ///< a loss_fn or an outputs_loss_fn
  bool scale_grads = true;
  bool wants_nccl = false;  ///< this rank's stages could use NCCL
  uint64_t order_hash = 0;  ///< of order_text(order)
  uint64_t pipe_hash = 0;   ///< of the stages' PipeDigest; 0 for stages built by hand
  /// A stage this rank built, with the shapes and dtypes it receives and sends.
  struct Stage {
    int index = 0;
    std::vector<TensorMeta> inputs, outputs;
    bool operator==(const Stage&) const = default;
  };
  std::vector<Stage> stages;
  bool operator==(const RankFacts&) const = default;
};

/// The full texts behind a rank's hashes.
struct RankDetail {
  std::string pipe;   ///< PipeDigest::encode() (empty for stages built by hand)
  std::string order;  ///< the order's text, one line per schedule rank
  bool operator==(const RankDetail&) const = default;
};

/// One member's yes or no in a group's vote (e.g. "can every member use NCCL?").
struct Vote {
  bool yes = false;
  bool operator==(const Vote&) const = default;
};

/// Every message kind of the protocol.
using WireMessage = std::variant<Notification, RankFacts, RankDetail, RemoteError, Vote>;

/// The bytes of `message`: the version, its kind, then its fields.
std::string encode_message(const WireMessage& message);

/// Decodes `bytes` into `out`. Returns an empty string, or what was wrong (another version, an
/// unknown kind, a count or size out of limits, a descriptor whose bytes disagree with its shape
/// and dtype, a truncated or overlong message); `out` is then unspecified. Every field is
/// checked; what decodes re-encodes to the same bytes.
std::string decode_message(std::string_view bytes, WireMessage& out);

/// Decodes bytes that must hold a `T`; throws std::invalid_argument saying `what` they were
/// (e.g. "rank 1's construction facts"), what was wrong, and to run one tensorplay version on
/// every rank.
template <typename T>
T decode_as(std::string_view bytes, std::string_view what);

/// The same for a Notification, without throwing: empty, or what was wrong.
std::string decode_notification(std::string_view bytes, Notification& note);

}  // namespace tensorplay::pipelining
