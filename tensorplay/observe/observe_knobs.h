// The knobs of observe/: where each rank's message log goes (read by init_process_group and
// tp-launch --log-dir). spdlog's level is base's (base/base_knobs.h).
#pragma once

#include "tensorplay/base/knob_registry.h"
#include "tensorplay/base/knob_spec.h"
#include "tensorplay/wire/wire_knobs.h"

namespace tensorplay::pipelining {

/// TENSORPLAY_LOG_DIR: folder of each rank's message log.
inline constexpr KnobSpec kLogDirKnob{
    .name = "TENSORPLAY_LOG_DIR",
    .alias = "TP_LOG_DIR",
    .type = KnobType::String,
    .example = "logs",
    .doc = "folder of each rank's message log, messages_rank_R.log (tp-launch --log-dir)"};

/// The rows of observe/, in their order.
inline constexpr const KnobSpec* kObserveKnobs[] = {&kLogDirKnob};

/// Registers the knobs of observe/ and of the layers below it (knob_registry.h).
inline void register_observe_knobs() {
  register_wire_knobs();
  register_knobs("observe", kObserveKnobs);
}

}  // namespace tensorplay::pipelining
