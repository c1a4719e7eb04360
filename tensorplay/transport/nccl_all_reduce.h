// NCCL all-reduce: sums a device tensor in place over the ranks of one communicator, for
// data-parallel gradient averaging on GPUs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "tensorplay/core/tensor.h"
#include "tensorplay/transport/channel.h"

namespace tensorplay::transport {

/// One NCCL communicator over a group (every member its own GPU) that runs sum all-reduces.
/// Every member calls all_reduce in the same order with a tensor of the same size and dtype.
class NcclAllReduce {
 public:
  /// Joins the communicator of `size` members as `rank` on CUDA device `device`, from `id`
  /// (nccl_unique_id() made on one member). Throws TransferError when NCCL is not built in, no
  /// device is visible, or not every member joined within `timeout`.
  NcclAllReduce(int rank, int size, Device device, const std::vector<uint8_t>& id,
                std::chrono::milliseconds timeout = std::chrono::minutes(2));
  ~NcclAllReduce();
  NcclAllReduce(const NcclAllReduce&) = delete;
  NcclAllReduce& operator=(const NcclAllReduce&) = delete;

  /// Sums `flat` (a contiguous float32 or bfloat16 tensor on this communicator's device) over
  /// the members in place, after the work already queued on the device's tensor stream, and
  /// returns once the sum is in place. A member that does not take part within the timeout
  /// aborts the communicator (TransferError naming it; later calls fail at once).
  void all_reduce(Tensor& flat);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensorplay::transport
