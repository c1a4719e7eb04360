// The CUDA caching allocator's free lists and statistics (no CUDA here: built in every
// configuration, so its locking is tested on machines without a GPU).
#include "tensorplay/cuda/caching_pool.h"

#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include "tensorplay/core/size_class.h"

namespace tensorplay::cuda {

namespace {
std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }
}  // namespace

CachingPool::DevicePool& CachingPool::pool(int device) {
  if (pools_.empty()) pools_.resize(memory_.device_count());
  return pools_.at(device);
}

void* CachingPool::allocate(int device, size_t bytes) {
  const size_t size = size_class(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    DevicePool& p = pool(device);
    auto it = p.free_blocks.find(size);
    if (it != p.free_blocks.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      p.stats.cached_bytes -= size;
      ++p.stats.cache_hits;
      p.stats.allocated_bytes += size;
      if (p.stats.allocated_bytes > p.stats.peak_allocated_bytes)
        p.stats.peak_allocated_bytes = p.stats.allocated_bytes;
      return block;
    }
  }
  // A miss: the device allocates without the lock held.
  void* block = memory_.allocate(device, size);
  if (block == nullptr) {
    // Out of memory: give this device's cached blocks back and try once more.
    release_cached(device);
    block = memory_.allocate(device, size);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  DevicePool& p = pool(device);
  ++p.stats.malloc_calls;
  if (block == nullptr)
    throw std::runtime_error("CUDA out of memory on cuda:" + std::to_string(device) +
                             ": could not get " + std::to_string(size) + " bytes; " +
                             mib(p.stats.allocated_bytes) +
                             " held by tensors. Use smaller microbatches or fewer stashed "
                             "activations");
  p.stats.allocated_bytes += size;
  if (p.stats.allocated_bytes > p.stats.peak_allocated_bytes)
    p.stats.peak_allocated_bytes = p.stats.allocated_bytes;
  return block;
}

void CachingPool::deallocate(int device, void* block, size_t bytes) {
  if (block == nullptr) return;
  const size_t size = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  DevicePool& p = pool(device);
  p.free_blocks[size].push_back(block);
  p.stats.allocated_bytes -= size;
  p.stats.cached_bytes += size;
}

void CachingPool::release_cached(int device) {
  std::vector<void*> taken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    DevicePool& p = pool(device);
    for (auto& [size, blocks] : p.free_blocks) {
      p.stats.cached_bytes -= size * blocks.size();
      taken.insert(taken.end(), blocks.begin(), blocks.end());
      blocks.clear();
    }
  }
  std::exception_ptr first_error;
  int64_t released = 0;
  for (void* block : taken) {
    try {
      memory_.release(device, block);
      ++released;
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pool(device).stats.free_calls += released;
  }
  if (first_error) std::rethrow_exception(first_error);
}

void CachingPool::empty_cache() {
  for (int d = 0; d < memory_.device_count(); ++d) release_cached(d);
}

CudaMemoryStats CachingPool::stats(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device < 0 || device >= memory_.device_count()) return {};
  return pool(device).stats;
}

void CachingPool::reset_peak(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device < 0 || device >= memory_.device_count()) return;
  DevicePool& p = pool(device);
  p.stats.peak_allocated_bytes = p.stats.allocated_bytes;
}

}  // namespace tensorplay::cuda
