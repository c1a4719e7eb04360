// Caching allocator for CUDA storage: size-class bins, per-device free lists, statistics.
#include <stdexcept>
#include <string>

#include "tensors/cuda/cuda_allocator.h"
#include "tensors/cuda/cuda_check.h"
#include "tensors/cuda/cuda_device.h"
#include "tensors/size_class.h"

namespace tensorplay {
namespace cuda {

namespace {
std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }
}  // namespace

CachingAllocator::DevicePool& CachingAllocator::pool(int device) {
  if (pools_.empty()) pools_.resize(device_count());
  return pools_[device];
}

void* CachingAllocator::allocate(size_t bytes, Device device) {
  check_device(device.index);
  size_t size = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  DevicePool& p = pool(device.index);
  void* ptr = nullptr;
  auto it = p.free_blocks.find(size);
  if (it != p.free_blocks.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    p.stats.cached_bytes -= size;
    ++p.stats.cache_hits;
  } else {
    DeviceGuard guard(device.index);
    cudaError_t error = cudaMalloc(&ptr, size);
    if (error == cudaErrorMemoryAllocation) {
      // Out of memory: give the cached blocks back to CUDA and try once more.
      cudaGetLastError();
      release_cached(device.index);
      error = cudaMalloc(&ptr, size);
    }
    ++p.stats.malloc_calls;
    if (error != cudaSuccess) {
      cudaGetLastError();
      throw std::runtime_error("CUDA out of memory on " + to_string(device) + ": could not get " +
                               std::to_string(size) + " bytes (" + cudaGetErrorString(error) +
                               "); " + mib(p.stats.allocated_bytes) +
                               " held by tensors. Use smaller microbatches or fewer stashed "
                               "activations");
    }
  }
  p.stats.allocated_bytes += size;
  if (p.stats.allocated_bytes > p.stats.peak_allocated_bytes)
    p.stats.peak_allocated_bytes = p.stats.allocated_bytes;
  return ptr;
}

void CachingAllocator::deallocate(void* ptr, size_t bytes, Device device) {
  if (!ptr) return;
  size_t size = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  DevicePool& p = pool(device.index);
  p.free_blocks[size].push_back(ptr);
  p.stats.allocated_bytes -= size;
  p.stats.cached_bytes += size;
}

void CachingAllocator::release_cached(int device) {
  DevicePool& p = pool(device);
  DeviceGuard guard(device);
  for (auto& [size, blocks] : p.free_blocks) {
    for (void* block : blocks) {
      TP_CUDA_CHECK(cudaFree(block));
      ++p.stats.free_calls;
      p.stats.cached_bytes -= size;
    }
    blocks.clear();
  }
}

CudaMemoryStats CachingAllocator::stats(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device < 0 || device >= device_count()) return {};
  return pool(device).stats;
}

void CachingAllocator::reset_peak(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device < 0 || device >= device_count()) return;
  pool(device).stats.peak_allocated_bytes = pool(device).stats.allocated_bytes;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int d = 0; d < device_count(); ++d) release_cached(d);
}

CachingAllocator& caching_allocator() {
  // Never destroyed: storages released during static destruction still return blocks here, and
  // the blocks are left to the driver at exit (the CUDA context may already be gone).
  static CachingAllocator* allocator = new CachingAllocator();
  return *allocator;
}

}  // namespace cuda

Allocator& cuda_allocator() { return cuda::caching_allocator(); }

CudaMemoryStats cuda_memory_stats(int device) { return cuda::caching_allocator().stats(device); }

void cuda_empty_cache() { cuda::caching_allocator().empty_cache(); }

void cuda_reset_peak_memory_stats(int device) { cuda::caching_allocator().reset_peak(device); }

}  // namespace tensorplay
