// Statistics and control of the host caching allocator, which keeps freed blocks of 4 KiB and
// more for reuse, so a steady-state training step on the CPU does not fault in fresh pages.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensorplay {

/// Figures of the host allocator, in bytes (rounded block sizes for blocks of cached sizes).
struct HostMemoryStats {
  size_t allocated_bytes = 0;       ///< held by live storages
  size_t peak_allocated_bytes = 0;  ///< highest allocated_bytes since start or reset
  size_t cached_bytes = 0;          ///< freed by storages, kept for reuse
  size_t cache_limit = 0;           ///< most bytes kept for reuse (0: caching off)
  int64_t cache_hits = 0;           ///< allocations served from the cache
  int64_t cache_misses = 0;         ///< allocations of a cached size that went to the system
  int64_t released_calls = 0;  ///< blocks given back to the system (over the limit, or emptied)
};

/// Current figures.
HostMemoryStats host_memory_stats();

/// Gives every cached block back to the system.
void host_empty_cache();

/// Sets peak_allocated_bytes to the current allocated_bytes.
void host_reset_peak_memory_stats();

/// Sets how many bytes of freed blocks the host allocator keeps (0 turns caching off and empties
/// the cache). The default is 1 GiB, or TENSORPLAY_HOST_CACHE_MB mebibytes when that variable is
/// set; builds with sanitizers default to 0 so that use-after-free stays visible.
void set_host_cache_limit(size_t bytes);

}  // namespace tensorplay
