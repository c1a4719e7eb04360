// NamedCheckpointInfo: what loading a layout-free checkpoint restored, and who wrote it (the
// writer's step, samples, stage count and layout), shared by the loader and the step reader.
#pragma once

#include <cstdint>
#include <string>

namespace tensorplay::pipelining {

/// What load_named_checkpoint restored, and who wrote it.
struct NamedCheckpointInfo {
  int64_t step = 0;
  /// Samples consumed when it was saved; -1 for a version-2 checkpoint (which has no count).
  int64_t samples_consumed = -1;
  int num_stages = 0;  ///< the writer's stage count
  std::string layout;  ///< the writer's layout in words
  /// 3: layout-free; 2: per-stage (tensorplay/pipelining/checkpoints/checkpoint.h).
  int version = 3;
  /// Bytes this process read from the data files (layout-free checkpoints; 0 for version 2).
  uint64_t bytes_read = 0;
};

}  // namespace tensorplay::pipelining
