// Caching allocator for CUDA storage: the caching pool (caching_pool.h) over cudaMalloc/cudaFree.
#include "tensorplay/cuda/cuda_allocator.h"
#include "tensorplay/cuda/cuda_check.h"
#include "tensorplay/cuda/cuda_device.h"

namespace tensorplay {
namespace cuda {

int CudaDeviceMemory::device_count() { return cuda::device_count(); }

void* CudaDeviceMemory::allocate(int device, size_t bytes) {
  DeviceGuard guard(device);
  void* ptr = nullptr;
  cudaError_t error = cudaMalloc(&ptr, bytes);
  if (error == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  TP_CUDA_CHECK(error);
  return ptr;
}

void CudaDeviceMemory::release(int device, void* block) {
  DeviceGuard guard(device);
  TP_CUDA_CHECK(cudaFree(block));
}

void* CachingAllocator::allocate(size_t bytes, Device device) {
  check_device(device.index);
  return pool_.allocate(device.index, bytes);
}

void CachingAllocator::deallocate(void* ptr, size_t bytes, Device device) {
  pool_.deallocate(device.index, ptr, bytes);
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
