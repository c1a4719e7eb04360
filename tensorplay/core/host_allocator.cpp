// The host allocator: 64-byte aligned memory, with freed blocks of 4 KiB and more kept in
// size-class free lists (up to a byte limit) and handed out again. Large blocks come from mmap
// in glibc; without the cache each training step would fault in and zero its pages again. Blocks
// from 4 KiB up come from glibc's heap through its slower paths (aligned, past its per-thread
// caches, merged into the heap's top when freed): a receive buffer of a few KiB per message cost
// more there than in the cache. Smaller blocks come from malloc's fast paths (see small_aligned).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensorplay/base/knobs.h"
#include "tensorplay/core/core_knobs.h"
#include "tensorplay/core/host_memory.h"
#include "tensorplay/core/size_class.h"
#include "tensorplay/core/storage.h"

namespace tensorplay {
namespace {

constexpr size_t kMinCachedBytes = size_t{4} << 10;

size_t default_limit() {
#ifdef TENSORPLAY_SANITIZE
  // Caching would hide use-after-free from the sanitizers: off unless asked for.
  if (!knob_is_set(kHostCacheMbKnob)) return 0;
#endif
  return static_cast<size_t>(knob_int(kHostCacheMbKnob)) << 20;
}

constexpr size_t kAlignment = 64;  // a cache line, and the widest vector load

void* aligned(size_t bytes) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (!p) throw std::bad_alloc();
  return p;
}

// A block under 4 KiB: glibc's aligned_alloc splits a larger chunk past its per-thread cache on
// every call (about three times a malloc's cost; a sixth of an empty pipeline stage's forward).
// These come from malloc with room to align, the pointer malloc gave kept just before the block.
void* small_aligned(size_t bytes) {
  void* raw = std::malloc(bytes + kAlignment + sizeof(void*));
  if (!raw) throw std::bad_alloc();
  const uintptr_t at = (reinterpret_cast<uintptr_t>(raw) + sizeof(void*) + kAlignment - 1) &
                       ~uintptr_t{kAlignment - 1};
  void* p = reinterpret_cast<void*>(at);
  static_cast<void**>(p)[-1] = raw;
  return p;
}

void small_free(void* p) { std::free(static_cast<void**>(p)[-1]); }

class HostCachingAllocator final : public Allocator {
 public:
  HostCachingAllocator() { stats_.cache_limit = default_limit(); }

  void* allocate(size_t bytes, Device) override {
    if (bytes < kMinCachedBytes) {
      void* p = small_aligned(bytes);
      std::lock_guard<std::mutex> lock(mutex_);
      count_allocated(bytes);
      return p;
    }
    size_t size = size_class(bytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_blocks_.find(size);
      if (it != free_blocks_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        stats_.cached_bytes -= size;
        ++stats_.cache_hits;
        count_allocated(size);
        return p;
      }
      ++stats_.cache_misses;
    }
    void* p = aligned(size);  // counted only once it succeeded
    std::lock_guard<std::mutex> lock(mutex_);
    count_allocated(size);
    return p;
  }

  void deallocate(void* ptr, size_t bytes, Device) override {
    if (!ptr) return;
    if (bytes < kMinCachedBytes) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        stats_.allocated_bytes -= bytes;
      }
      small_free(ptr);
      return;
    }
    {
      size_t size = size_class(bytes);
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.allocated_bytes -= size;
      if (stats_.cached_bytes + size <= stats_.cache_limit) {
        free_blocks_[size].push_back(ptr);
        stats_.cached_bytes += size;
        return;
      }
      ++stats_.released_calls;
    }
    std::free(ptr);
  }

  HostMemoryStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void set_limit(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.cache_limit = bytes;
    release_until(bytes);
  }

  void empty() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_until(0);
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
  }

 private:
  // Requires mutex_.
  void count_allocated(size_t bytes) {
    stats_.allocated_bytes += bytes;
    if (stats_.allocated_bytes > stats_.peak_allocated_bytes)
      stats_.peak_allocated_bytes = stats_.allocated_bytes;
  }

  // Frees cached blocks until at most `bytes` remain cached. Requires mutex_.
  void release_until(size_t bytes) {
    for (auto& [size, blocks] : free_blocks_) {
      while (!blocks.empty() && stats_.cached_bytes > bytes) {
        std::free(blocks.back());
        blocks.pop_back();
        stats_.cached_bytes -= size;
        ++stats_.released_calls;
      }
    }
  }

  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_blocks_;  // size class -> blocks
  HostMemoryStats stats_;
};

HostCachingAllocator& host_caching_allocator() {
  // Never destroyed: storages released during static destruction still come back here.
  static HostCachingAllocator* allocator = new HostCachingAllocator();
  return *allocator;
}

}  // namespace

Allocator& host_allocator() { return host_caching_allocator(); }

HostMemoryStats host_memory_stats() { return host_caching_allocator().stats(); }

void host_empty_cache() { host_caching_allocator().empty(); }

void host_reset_peak_memory_stats() { host_caching_allocator().reset_peak(); }

void set_host_cache_limit(size_t bytes) { host_caching_allocator().set_limit(bytes); }

}  // namespace tensorplay
