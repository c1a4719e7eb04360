// Block-wide reductions for kernels that give one block per row. The combination order depends
// only on blockDim, so results are deterministic run to run. Internal to cuda/.
#pragma once

#include <cmath>

namespace tensorplay::cuda {

constexpr int kWarpSize = 32;

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, offset));
  return v;
}

/// Sum of `v` over the block, returned to every thread. blockDim.x must be a multiple of 32 (at
/// most 1024); `scratch` holds 32 floats of shared memory. Synchronizes the block.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  int warps = blockDim.x / kWarpSize;
  v = threadIdx.x < warps ? scratch[threadIdx.x] : 0.0f;
  if (warp == 0) v = warp_sum(v);
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  return scratch[0];
}

/// Maximum of `v` over the block, returned to every thread (same rules as block_sum).
__device__ __forceinline__ float block_max(float v, float* scratch) {
  int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  int warps = blockDim.x / kWarpSize;
  v = threadIdx.x < warps ? scratch[threadIdx.x] : -INFINITY;
  if (warp == 0) v = warp_max(v);
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  return scratch[0];
}

}  // namespace tensorplay::cuda
