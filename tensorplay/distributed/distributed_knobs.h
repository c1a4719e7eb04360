// The knobs of distributed/: the job's cluster token and the rendezvous timeout (read by the
// launcher-environment reader, launch_env.cpp, and tp-launch).
#pragma once

#include "tensorplay/base/knob_registry.h"
#include "tensorplay/base/knob_spec.h"
#include "tensorplay/observe/observe_knobs.h"

namespace tensorplay::distributed {

/// TENSORPLAY_CLUSTER_TOKEN: the secret every rank of a job presents.
inline constexpr KnobSpec kClusterTokenKnob{
    .name = "TENSORPLAY_CLUSTER_TOKEN",
    .alias = "TP_CLUSTER_TOKEN",
    .type = KnobType::String,
    .example = "4f1c0e9a7b2d",
    .doc = "the secret every rank of a job presents (tp-launch makes one if unset)",
    .secret = true};

/// TENSORPLAY_RDZV_TIMEOUT: seconds the ranks may take to find each other.
inline constexpr KnobSpec kRdzvTimeoutKnob{
    .name = "TENSORPLAY_RDZV_TIMEOUT",
    .alias = "TP_RDZV_TIMEOUT",
    .type = KnobType::Double,
    .default_text = "300",
    .min = 0.1,
    .max = 86400,
    .example = "900",
    .doc =
        "seconds the ranks may take to find each other (tp-launch --rdzv-timeout sets it, 900 "
        "by default; init_process_group's .timeout wins)"};

/// The rows of distributed/, in their order.
inline constexpr const KnobSpec* kDistributedKnobs[] = {&kClusterTokenKnob, &kRdzvTimeoutKnob};

/// Registers the knobs of distributed/ and of every layer below it (knob_registry.h): all the
/// library's knobs.
inline void register_distributed_knobs() {
  pipelining::register_observe_knobs();
  register_knobs("distributed", kDistributedKnobs);
}

}  // namespace tensorplay::distributed
