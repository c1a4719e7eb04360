// The CUDA caching allocator: rounds requests to size classes and keeps freed blocks in per-device
// free lists for reuse, so a steady-state training step makes no cudaMalloc. Internal.
#pragma once

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensors/cuda_memory.h"
#include "tensors/storage.h"

namespace tensorplay::cuda {

/// Caching allocator for all CUDA devices. Blocks are reused in stream order: all tensor work on
/// a device runs on its one stream, so a block freed on the host and handed out again is only
/// touched by later work on that stream. Memory used by other streams (NCCL) must be synchronized
/// with the device stream before its storage is released.
class CachingAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes, Device device) override;
  void deallocate(void* ptr, size_t bytes, Device device) override;

  CudaMemoryStats stats(int device);
  void reset_peak(int device);
  /// cudaFree of every cached block of every device.
  void empty_cache();

 private:
  struct DevicePool {
    std::unordered_map<size_t, std::vector<void*>> free_blocks;  // size class -> blocks
    CudaMemoryStats stats;
  };
  DevicePool& pool(int device);     // requires mutex_
  void release_cached(int device);  // requires mutex_

  std::mutex mutex_;
  std::vector<DevicePool> pools_;
};

/// The process-wide CUDA allocator (storage.cpp installs it for DeviceType::CUDA).
CachingAllocator& caching_allocator();

}  // namespace tensorplay::cuda
