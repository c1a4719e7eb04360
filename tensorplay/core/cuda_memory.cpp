// CPU-only answers of cuda_memory.h; the CUDA build defines these in cuda/cuda_allocator.cu.
#include "tensorplay/core/cuda_memory.h"

namespace tensorplay {

#ifndef TENSORPLAY_WITH_CUDA
CudaMemoryStats cuda_memory_stats(int) { return {}; }
void cuda_empty_cache() {}
void cuda_reset_peak_memory_stats(int) {}
#endif

}  // namespace tensorplay
