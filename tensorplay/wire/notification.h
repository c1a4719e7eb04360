// Notification: the message that tells the rank hosting a stage that its input or output gradient
// for one microbatch is on the channel. Plain values only: it crosses processes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorplay/transport/tensor_descriptor.h"
#include "tensorplay/wire/pipeline_tag.h"

namespace tensorplay::pipelining {

/// A notification for the rank hosting `stage`: its input (Forward) or output gradient
/// (Backward) for `microbatch` has been posted on the channel by the process of global rank
/// `source`, described by `tensors`.
struct Notification {
  uint64_t step = 0;
  int stage = 0;
  Direction direction = Direction::Forward;
  int microbatch = 0;
  int source = 0;
  std::vector<transport::TensorDescriptor> tensors;

  PipelineTag tag() const { return {step, stage, direction, microbatch}; }
};

/// "input S:MB" or "grad S:MB", as the message log names a notification.
std::string describe(const Notification& n);

}  // namespace tensorplay::pipelining
