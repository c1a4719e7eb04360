// Statistics and control of the CUDA caching allocator, for tests, benchmarks and memory caps.
// Without CUDA support (or without a GPU) every figure is zero and empty_cache does nothing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tensorplay {

/// Memory figures of one CUDA device, in bytes of the rounded block sizes.
struct CudaMemoryStats {
  size_t allocated_bytes = 0;       ///< held by live storages
  size_t cached_bytes = 0;          ///< freed by storages, kept for reuse (not returned to CUDA)
  size_t peak_allocated_bytes = 0;  ///< highest allocated_bytes since start or reset
  int64_t malloc_calls = 0;         ///< cudaMalloc calls made (a cache miss each)
  int64_t free_calls = 0;           ///< cudaFree calls made (empty_cache, out-of-memory retry)
  int64_t cache_hits = 0;           ///< allocations served from the cache
};

/// Figures of CUDA device `device` (zeros when CUDA is absent).
CudaMemoryStats cuda_memory_stats(int device = 0);

/// Returns every cached (unused) block of every device to CUDA with cudaFree.
void cuda_empty_cache();

/// Sets peak_allocated_bytes to the current allocated_bytes on `device`.
void cuda_reset_peak_memory_stats(int device = 0);

}  // namespace tensorplay
