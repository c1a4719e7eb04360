// The CUDA caching allocator's bookkeeping apart from CUDA: size-class free lists per device and
// statistics, with device calls that may wait (a free waits for the whole device) kept outside the
// lock. Internal; the allocator gives it the real device, the tests a stand-in.
#pragma once

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensorplay/core/cuda_memory.h"

namespace tensorplay::cuda {

/// Raw device memory as the pool needs it.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  /// Number of devices (fixed for the process).
  virtual int device_count() = 0;
  /// `bytes` of memory on `device`, or nullptr when the device is out of memory; throws on any
  /// other error.
  virtual void* allocate(int device, size_t bytes) = 0;
  /// Gives a block back. May block for a long time: cudaFree waits for all work on the device,
  /// NCCL kernels waiting for a peer included.
  virtual void release(int device, void* block) = 0;
};

/// Size-class caching over a DeviceMemory. Thread-safe; the pool's lock is never held while the
/// device allocates or releases, so a thread blocked in a release (or a slow allocation) does not
/// stop other threads from taking cached blocks or returning theirs.
class CachingPool {
 public:
  explicit CachingPool(DeviceMemory& memory) : memory_(memory) {}

  /// A block of at least `bytes` on `device` (an index the caller has checked): a cached one of
  /// the same size class, else a new one; out of memory, the device's cached blocks are released
  /// and the allocation tried once more. Throws std::runtime_error naming the device when that
  /// fails too.
  void* allocate(int device, size_t bytes);
  /// Keeps the block for reuse (never released to the device here).
  void deallocate(int device, void* block, size_t bytes);
  /// Releases every cached block of every device.
  void empty_cache();

  /// Figures of `device` (zeros for an index that is not a device).
  CudaMemoryStats stats(int device);
  /// Sets the peak to the bytes allocated now.
  void reset_peak(int device);

 private:
  struct DevicePool {
    std::unordered_map<size_t, std::vector<void*>> free_blocks;  // size class -> blocks
    CudaMemoryStats stats;
  };
  DevicePool& pool(int device);     // requires mutex_
  void release_cached(int device);  // takes the blocks under mutex_, releases them outside it

  DeviceMemory& memory_;
  std::mutex mutex_;
  std::vector<DevicePool> pools_;
};

}  // namespace tensorplay::cuda
