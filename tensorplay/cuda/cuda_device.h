// Per-device CUDA state shared by the kernels and the allocator: the device count, a guard that
// makes a device current, the one stream per device all tensor work runs on, and the lazily
// created cuBLAS handle per device. Internal to cuda/ (it names CUDA types).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "tensorplay/cuda/device_guard_logic.h"

namespace tensorplay::cuda {

/// Number of usable devices; 0 when there is no driver or no device (never throws).
int device_count();

/// Throws std::invalid_argument naming `device` when it is not a present device index.
void check_device(int device);

/// Index of the device that owns `ptr` (device memory from the allocator).
int device_of(const void* ptr);

/// The calling thread's current device, or -1 when it has none yet (no CUDA context bound: the
/// runtime would report device 0 there and create its context on first use).
int current_device_or_none();

/// The operations DeviceGuard uses on real devices (throws on CUDA errors).
const CurrentDeviceOps& cuda_current_device_ops();

/// Makes a device current on this thread for the guard's lifetime, then restores the previous
/// one; a thread that had none keeps `device` (see BasicDeviceGuard).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : guard_(cuda_current_device_ops(), device) {}
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  BasicDeviceGuard guard_;
};

/// The stream every kernel, cuBLAS call and copy touching `device` is issued on. Created on first
/// use with default flags, so it also orders with work on the legacy default stream.
cudaStream_t stream(int device);

/// The cuBLAS handle of `device`, bound to stream(device). Created on first use.
cublasHandle_t cublas_handle(int device);

/// Waits for all work queued on the streams created so far.
void synchronize_all();

/// Blocks per launch and a grid size covering n elements (grid-stride loops cover the rest).
constexpr int kBlockSize = 256;
inline unsigned grid_for(long long n) {
  long long blocks = (n + kBlockSize - 1) / kBlockSize;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks > 65535LL * 8 ? 65535LL * 8 : blocks);
}

}  // namespace tensorplay::cuda
