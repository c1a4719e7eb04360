// Messages that never leave the process: a step's data and its tally travel by pointer from a
// driver to its own process's stage actors. Beside the protocol's types (wire/detail/).
#pragma once

#include <atomic>
#include <caf/all.hpp>
#include <memory>

#include "tensorplay/pipelining/runtime/step_data.h"
#include "tensorplay/wire/detail/caf_messages.h"

namespace tensorplay::pipelining::detail {

/// The step's data travels by pointer from a driver to its own process's stage actor only.
using StepHandle = std::shared_ptr<StepData>;

/// The local ranks of one step that have not finished it: the rank that finishes last tells the
/// driver once for all of them (one wake-up of the driver per step rather than one per rank).
struct StepTally {
  explicit StepTally(int n) : ranks(n), left(n) {}
  const int ranks;
  std::atomic<int> left;
};
/// Travels with the step's data, from a driver to its own process's stage actors only.
using StepTallyHandle = std::shared_ptr<StepTally>;

}  // namespace tensorplay::pipelining::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tensorplay::pipelining::detail::StepHandle)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tensorplay::pipelining::detail::StepTallyHandle)
