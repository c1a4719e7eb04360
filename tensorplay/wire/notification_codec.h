// The byte form of a stage notification when it travels on the data channel (UCX messages)
// instead of CAF: a fixed little-endian layout and a decoder that checks every field.
#pragma once

#include <string>
#include <string_view>

#include "tensorplay/wire/notification.h"

namespace tensorplay::pipelining {

/// Limits a decoded notification must respect.
inline constexpr size_t kMaxWireTensors = 4096;
inline constexpr size_t kMaxWireDims = 16;

/// The bytes of `note` (its step, stage, direction, microbatch, source and descriptors).
std::string encode_notification(const Notification& note);

/// Decodes `bytes` into `note`. Returns an empty string, or what was wrong (a wrong version or
/// direction, a count or size out of limits, a shape whose bytes disagree with its dtype, a
/// truncated or overlong message); `note` is then unspecified.
std::string decode_notification(std::string_view bytes, Notification& note);

}  // namespace tensorplay::pipelining
