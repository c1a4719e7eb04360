// What the control plane says about a tensor on the data plane: its shape, dtype, size, and the
// tag under which its bytes can be fetched. Never a raw pointer across a process boundary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensors/tensor.h"

namespace tensorplay::transport {

/// Which way a transfer goes through the pipeline.
enum class Direction : uint8_t { Forward, Backward };

/// The receiving stage that collectives (ring_all_reduce.h) put in their tags: the highest a
/// UCX tag holds. A pipeline's own stages are 0 to kCollectiveStage - 1 (schedules across
/// processes refuse more stages), so a collective never matches a pipeline transfer.
inline constexpr int32_t kCollectiveStage = 4095;

/// Tag naming one boundary value of one microbatch of one step.
struct TransferTag {
  uint64_t step = 0;
  int32_t stage = 0;  ///< receiving stage (kCollectiveStage: a collective's transfer)
  Direction direction = Direction::Forward;
  int32_t microbatch = 0;
  /// Which schedule's traffic this is, where several share one channel (0 in one process).
  uint32_t stream = 0;
  bool operator==(const TransferTag&) const = default;
  /// 64-bit key (step modulo 2^24, stage < 2^15, microbatch < 2^24).
  uint64_t key() const;
};
std::string to_string(const TransferTag& tag);

/// Metadata of one tensor of a transfer.
struct TensorDescriptor {
  Shape shape;
  DType dtype = DType::Float32;
  uint64_t bytes = 0;
  bool defined = true;  ///< false for an absent gradient
  bool operator==(const TensorDescriptor&) const = default;
};

/// Describes `t` (undefined tensors give `defined = false`).
TensorDescriptor describe(const Tensor& t);

}  // namespace tensorplay::transport
