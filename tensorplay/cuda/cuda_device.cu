// Device discovery, current-device guard, per-device streams and cuBLAS handles.
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorplay/base/knobs.h"
#include "tensorplay/core/core_knobs.h"
#include "tensorplay/cuda/cuda_check.h"
#include "tensorplay/cuda/cuda_device.h"

namespace tensorplay {

namespace cuda {

void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line) {
  cudaGetLastError();  // clear non-sticky errors so the next call starts clean
  throw std::runtime_error(std::string("CUDA error at ") + file + ":" + std::to_string(line) +
                           ": " + call + " failed: " + cudaGetErrorName(error) + " (" +
                           cudaGetErrorString(error) + ")");
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string("cuBLAS error at ") + file + ":" + std::to_string(line) +
                           ": " + call + " failed: " + cublasGetStatusName(status) + " (" +
                           cublasGetStatusString(status) + ")");
}

namespace {

struct DeviceState {
  std::once_flag stream_once;
  cudaStream_t stream = nullptr;
  std::once_flag cublas_once;
  cublasHandle_t cublas = nullptr;
};

std::vector<std::unique_ptr<DeviceState>>& states() {
  static std::vector<std::unique_ptr<DeviceState>> table = [] {
    std::vector<std::unique_ptr<DeviceState>> t;
    for (int i = 0; i < device_count(); ++i) t.push_back(std::make_unique<DeviceState>());
    return t;
  }();
  return table;
}

DeviceState& state(int device) {
  check_device(device);
  return *states()[device];
}

}  // namespace

int device_count() {
  static const int count = [] {
    // Before the first CUDA call, which makes the context: one hardware queue per stream of an
    // NCCL channel (tensorplay/transport/detail/nccl_links.h, hardware_queue_problem). A user's
    // value stays.
    if (!knob_is_set(kCudaDeviceMaxConnectionsKnob))
      setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 1);  // unset or empty
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

void check_device(int device) {
  int n = device_count();
  if (device < 0 || device >= n) {
    throw std::invalid_argument("cuda:" + std::to_string(device) +
                                " is not a usable device: this process sees " + std::to_string(n) +
                                " CUDA device(s)" +
                                (n == 0 ? " (no GPU or no driver; use the cpu device)" : "") +
                                "; check CUDA_VISIBLE_DEVICES");
  }
}

int device_of(const void* ptr) {
  if (device_count() == 1) return 0;
  cudaPointerAttributes attributes{};
  TP_CUDA_CHECK(cudaPointerGetAttributes(&attributes, ptr));
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    throw std::invalid_argument("CUDA kernel given a pointer that is not device memory");
  return attributes.device;
}

namespace {

// cuCtxGetCurrent through the runtime's driver entry points, so nothing links libcuda directly
// (the CPU-only machines that run the tests have no driver). Null when the driver lacks it.
using CtxGetCurrent = int (*)(void** context);

CtxGetCurrent ctx_get_current() {
  static const CtxGetCurrent function = [] {
    void* pointer = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &pointer, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return CtxGetCurrent{nullptr};
    }
    return reinterpret_cast<CtxGetCurrent>(pointer);
  }();
  return function;
}

int current_for_guard() { return current_device_or_none(); }

void make_current_for_guard(int device) { TP_CUDA_CHECK(cudaSetDevice(device)); }

}  // namespace

int current_device_or_none() {
  if (CtxGetCurrent get = ctx_get_current()) {
    void* context = nullptr;
    if (get(&context) != 0 || context == nullptr) return -1;
  }
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return device;
}

const CurrentDeviceOps& cuda_current_device_ops() {
  static const CurrentDeviceOps ops{&current_for_guard, &make_current_for_guard};
  return ops;
}

cudaStream_t stream(int device) {
  DeviceState& s = state(device);
  std::call_once(s.stream_once, [&] {
    DeviceGuard guard(device);
    TP_CUDA_CHECK(cudaStreamCreate(&s.stream));
  });
  return s.stream;
}

cublasHandle_t cublas_handle(int device) {
  DeviceState& s = state(device);
  std::call_once(s.cublas_once, [&] {
    DeviceGuard guard(device);
    TP_CUBLAS_CHECK(cublasCreate(&s.cublas));
    TP_CUBLAS_CHECK(cublasSetStream(s.cublas, stream(device)));
    // Float32 products stay exact float32 (they are checked against the CPU) unless the user
    // opts into TF32 tensor cores. bfloat16 products must not reduce split-K partial sums in
    // bfloat16: the kernel table promises float32 accumulation and one rounding per element.
    int mode = CUBLAS_DEFAULT_MATH;
    if (knob_bool(kCudaTf32Knob)) mode = CUBLAS_TF32_TENSOR_OP_MATH;
    TP_CUBLAS_CHECK(cublasSetMathMode(
        s.cublas,
        static_cast<cublasMath_t>(mode | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  });
  return s.cublas;
}

void synchronize_all() {
  for (int d = 0; d < device_count(); ++d) {
    DeviceState& s = *states()[d];
    if (s.stream) TP_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  }
}

}  // namespace cuda

/// Used by device_info.cpp: the number of devices, 0 without a driver or a GPU.
int cuda_device_count_impl() { return cuda::device_count(); }

}  // namespace tensorplay
