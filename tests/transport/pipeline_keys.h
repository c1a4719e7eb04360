// Keys for the channel tests: transfers named as the pipeline names them
// (tensorplay/wire/pipeline_tag.h), so that the channels' errors read as they do in a schedule.
#pragma once

#include <cstdint>

#include "tensorplay/wire/pipeline_tag.h"

namespace tensorplay::testing {

using pipelining::Direction;

/// The pipeline's key of (`step`, `stage`, `direction`, `microbatch`) on `stream`.
inline transport::TransferKey pkey(uint64_t step, int stage, Direction direction, int microbatch,
                                   uint32_t stream = 0) {
  return pipelining::pipeline_key(stream, {step, stage, direction, microbatch});
}

}  // namespace tensorplay::testing
