// Error checks for CUDA runtime and cuBLAS calls: a failing call throws std::runtime_error naming
// the call, its file:line and CUDA's own error string. Internal to cuda/.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace tensorplay::cuda {

/// Throws a std::runtime_error describing a failed CUDA runtime call (and clears the error).
[[noreturn]] void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line);
/// Throws a std::runtime_error describing a failed cuBLAS call.
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);

}  // namespace tensorplay::cuda

/// Checks a cudaError_t-returning call.
#define TP_CUDA_CHECK(call)                                                            \
  do {                                                                                 \
    cudaError_t tp_cuda_error_ = (call);                                               \
    if (tp_cuda_error_ != cudaSuccess)                                                 \
      ::tensorplay::cuda::throw_cuda_error(tp_cuda_error_, #call, __FILE__, __LINE__); \
  } while (0)

/// Checks a cublasStatus_t-returning call.
#define TP_CUBLAS_CHECK(call)                                                               \
  do {                                                                                      \
    cublasStatus_t tp_cublas_status_ = (call);                                              \
    if (tp_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                         \
      ::tensorplay::cuda::throw_cublas_error(tp_cublas_status_, #call, __FILE__, __LINE__); \
  } while (0)

/// Checks that the last kernel launch was accepted (bad configuration, no device, ...).
#define TP_CUDA_CHECK_LAUNCH() TP_CUDA_CHECK(cudaGetLastError())
