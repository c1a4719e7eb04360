// Host-to-device copies staged through a ring of pinned host buffers, apart from CUDA: the
// caller's (pageable) bytes go into a free slot and the device copy is queued on the tensor stream,
// so a copy returns without waiting for the stream. Internal; the CUDA backend gives it the real
// device, the tests a stand-in.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

namespace tensorplay::cuda {

/// What the ring needs of one device.
class StagingDevice {
 public:
  virtual ~StagingDevice() = default;
  /// `bytes` of pinned (page-locked) host memory, kept for the process; throws when none.
  virtual void* allocate_pinned(size_t bytes) = 0;
  /// Queues a copy of `bytes` from pinned `src` to device memory `dst` on the tensor stream, then
  /// marks `slot` as in use until that copy has run.
  virtual void queue_copy(void* dst, const void* src, size_t bytes, int slot) = 0;
  /// Blocks until the copy last queued from `slot` has run (at once when none is in flight).
  virtual void wait_slot(int slot) = 0;
};

/// A ring of `slots` pinned buffers of `slot_bytes` each, allocated on first use. Thread-safe (one
/// copy at a time). A copy larger than a slot goes in slot-sized pieces; a slot is refilled only
/// after its previous copy has run, so the device never reads bytes that were overwritten.
class StagingRing {
 public:
  StagingRing(StagingDevice& device, size_t slot_bytes, int slots);

  /// Copies `bytes` from host memory `src` (any memory; free to change on return) to device
  /// memory `dst`, ordered on the tensor stream after the work queued there.
  void copy_to_device(void* dst, const void* src, size_t bytes);

  /// Times a copy waited on a slot it had used before (the ring came round; the wait returns at
  /// once when that slot's copy has already run).
  size_t waits() const;

 private:
  StagingDevice& device_;
  const size_t slot_bytes_;
  const int slots_;
  mutable std::mutex mutex_;
  std::vector<char*> buffers_;  // empty until the first copy
  std::vector<bool> in_flight_;
  int next_ = 0;
  size_t waits_ = 0;
};

}  // namespace tensorplay::cuda
