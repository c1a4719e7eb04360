// The CUDA caching allocator: rounds requests to size classes and keeps freed blocks in per-device
// free lists for reuse, so a steady-state training step makes no cudaMalloc. Internal.
#pragma once

#include <cstddef>

#include "tensorplay/core/cuda_memory.h"
#include "tensorplay/core/storage.h"
#include "tensorplay/cuda/caching_pool.h"

namespace tensorplay::cuda {

/// cudaMalloc and cudaFree as the caching pool's device.
class CudaDeviceMemory final : public DeviceMemory {
 public:
  int device_count() override;
  void* allocate(int device, size_t bytes) override;
  void release(int device, void* block) override;
};

/// Caching allocator for all CUDA devices. Blocks are reused in stream order: all tensor work on
/// a device runs on its one stream, so a block freed on the host and handed out again is only
/// touched by later work on that stream. Memory used by other streams (NCCL) must be synchronized
/// with the device stream before its storage is released. cudaFree (the out-of-memory retry,
/// empty_cache) runs outside the allocator's lock: it waits for the whole device, and other
/// threads keep allocating from the cache meanwhile.
class CachingAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes, Device device) override;
  void deallocate(void* ptr, size_t bytes, Device device) override;

  CudaMemoryStats stats(int device) { return pool_.stats(device); }
  void reset_peak(int device) { pool_.reset_peak(device); }
  /// cudaFree of every cached block of every device.
  void empty_cache() { pool_.empty_cache(); }

 private:
  CudaDeviceMemory memory_;
  CachingPool pool_{memory_};
};

/// The process-wide CUDA allocator (storage.cpp installs it for DeviceType::CUDA).
CachingAllocator& caching_allocator();

}  // namespace tensorplay::cuda
