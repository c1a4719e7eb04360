// The benchmarks' own knobs: where the PyTorch peers' interpreter is and which tp-launch starts
// the ranks (read in python_peer.h and mlp_pipeline_job.h).
#pragma once

#include "tensorplay/base/knob_registry.h"
#include "tensorplay/base/knob_spec.h"
#include "tensorplay/knobs.h"

namespace bench {

/// TENSORPLAY_TORCH_VENV: the virtual environment of the PyTorch peers.
inline constexpr tensorplay::KnobSpec kTorchVenvKnob{
    .name = "TENSORPLAY_TORCH_VENV",
    .type = tensorplay::KnobType::String,
    .example = "/opt/torch-venv",
    .doc =
        "benchmarks: the virtual environment of the PyTorch peers (unset: torch-venv beside "
        "them)"};

/// TENSORPLAY_PYTHON: the interpreter of the PyTorch peers.
inline constexpr tensorplay::KnobSpec kPythonKnob{
    .name = "TENSORPLAY_PYTHON",
    .type = tensorplay::KnobType::String,
    .example = "/usr/bin/python3",
    .doc = "benchmarks: the interpreter of the PyTorch peers, one that imports torch"};

/// TENSORPLAY_TORCH_INSTALL: pip-install torch when no interpreter has it.
inline constexpr tensorplay::KnobSpec kTorchInstallKnob{
    .name = "TENSORPLAY_TORCH_INSTALL",
    .type = tensorplay::KnobType::Bool,
    .default_text = "1",
    .example = "0",
    .doc = "benchmarks: pip-install torch into the virtual environment when no interpreter has it"};

/// TENSORPLAY_TP_LAUNCH: the tp-launch that starts the benchmarks' ranks.
inline constexpr tensorplay::KnobSpec kTpLaunchKnob{
    .name = "TENSORPLAY_TP_LAUNCH",
    .type = tensorplay::KnobType::String,
    .example = "build/tools/tp-launch/tp-launch",
    .doc = "benchmarks: the tp-launch that starts their ranks (unset: the one built beside them)"};

/// The benchmarks' rows, in their order.
inline constexpr const tensorplay::KnobSpec* kBenchKnobs[] = {&kTorchVenvKnob, &kPythonKnob,
                                                              &kTorchInstallKnob, &kTpLaunchKnob};

/// Registers the library's knobs and the benchmarks' own.
inline void register_bench_knobs() {
  tensorplay::register_library_knobs();
  tensorplay::register_knobs("bench", kBenchKnobs);
}

}  // namespace bench
