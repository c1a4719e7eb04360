// The base layer's own knobs: spdlog's level, which the logging setup (logging.h) reads. Every
// layer's registration of its knobs starts here.
#pragma once

#include "tensorplay/base/knob_registry.h"
#include "tensorplay/base/knob_spec.h"

namespace tensorplay::inline base {

/// SPDLOG_LEVEL: spdlog's own level; when set, the terminal log follows it.
inline constexpr KnobSpec kSpdlogLevelKnob{
    .name = "SPDLOG_LEVEL",
    .type = KnobType::String,
    .example = "debug",
    .doc =
        "spdlog's own level (debug turns the message log on); when set, the terminal log "
        "follows it",
    .third_party = true};

/// The base layer's rows, in their order.
inline constexpr const KnobSpec* kBaseKnobs[] = {&kSpdlogLevelKnob};

/// Registers the base layer's knobs (knob_registry.h).
inline void register_base_knobs() { register_knobs("base", kBaseKnobs); }

}  // namespace tensorplay::inline base
