// CudaBackend: copies between host and devices, fill, dtype conversion, and the dispatch of the
// elementwise and reduction kernels to the stream of the device that owns the output.
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "tensorplay/cuda/cuda_backend.h"
#include "tensorplay/cuda/cuda_check.h"
#include "tensorplay/cuda/cuda_device.h"
#include "tensorplay/cuda/cuda_kernels.h"
#include "tensorplay/cuda/staging_ring.h"

namespace tensorplay {
namespace cuda {
namespace {

/// Orders `waiter`'s stream after the work queued so far on `signaller`'s stream.
void stream_wait(int waiter, int signaller) {
  DeviceGuard guard(signaller);
  cudaEvent_t event;
  TP_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  TP_CUDA_CHECK(cudaEventRecord(event, stream(signaller)));
  TP_CUDA_CHECK(cudaStreamWaitEvent(stream(waiter), event, 0));
  TP_CUDA_CHECK(cudaEventDestroy(event));  // released once the wait has consumed it
}

/// Enables direct peer access from `device` to `peer` once, when the hardware allows it;
/// otherwise cudaMemcpyPeerAsync stages through the host.
void enable_peer_access(int device, int peer) {
  int can = 0;
  TP_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
  if (!can) return;
  DeviceGuard guard(device);
  cudaError_t error = cudaDeviceEnablePeerAccess(peer, 0);
  if (error == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
  } else {
    TP_CUDA_CHECK(error);
  }
}

/// The pinned staging of one device: slots copied to the device on its tensor stream, each with
/// an event marking when the device has read it. Never freed (cudaFreeHost waits for the device).
class PinnedStaging final : public StagingDevice {
 public:
  explicit PinnedStaging(int device) : device_(device) {}
  void* allocate_pinned(size_t bytes) override {
    void* p = nullptr;
    TP_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
    return p;
  }
  void queue_copy(void* dst, const void* src, size_t bytes, int slot) override {
    while (static_cast<int>(events_.size()) <= slot) {
      cudaEvent_t e = nullptr;
      TP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      events_.push_back(e);
    }
    TP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream(device_)));
    TP_CUDA_CHECK(cudaEventRecord(events_[static_cast<size_t>(slot)], stream(device_)));
  }
  void wait_slot(int slot) override {
    TP_CUDA_CHECK(cudaEventSynchronize(events_.at(static_cast<size_t>(slot))));
  }

 private:
  int device_;
  std::vector<cudaEvent_t> events_;  // by slot; guarded by the ring's lock
};

/// 4 slots of 4 MiB per device: copies up to 16 MiB queue without waiting.
constexpr size_t kStagingSlotBytes = size_t{4} << 20;
constexpr int kStagingSlots = 4;

StagingRing& staging_ring(int device) {
  struct Staging {
    PinnedStaging device;
    StagingRing ring;
    explicit Staging(int d) : device(d), ring(device, kStagingSlotBytes, kStagingSlots) {}
  };
  static std::mutex mutex;
  // By device; never destroyed (work may still be queued at exit).
  static auto* rings =
      new std::vector<std::unique_ptr<Staging>>(static_cast<size_t>(device_count()));
  std::lock_guard lock(mutex);
  auto& r = rings->at(static_cast<size_t>(device));
  if (!r) r = std::make_unique<Staging>(device);
  return r->ring;
}

}  // namespace

void CudaBackend::copy(void* dst, Device dst_device, const void* src, Device src_device,
                       size_t bytes) const {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    TP_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToHost));
  } else if (src_device.is_cpu()) {
    // Host -> device: through pinned slots, so the caller may free or change the host memory on
    // return without this thread waiting for the work queued on the stream.
    int d = dst_device.index;
    DeviceGuard guard(d);
    staging_ring(d).copy_to_device(dst, src, bytes);
  } else if (dst_device.is_cpu()) {
    int s = src_device.index;
    DeviceGuard guard(s);
    TP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream(s)));
    TP_CUDA_CHECK(cudaStreamSynchronize(stream(s)));
  } else if (dst_device.index == src_device.index) {
    int d = dst_device.index;
    DeviceGuard guard(d);
    TP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream(d)));
  } else {
    // Peer copy, issued on the source stream. The destination block may still be read by work
    // queued on its own stream (the caching allocator reuses it), so the copy waits for that
    // stream, and later work on the destination stream waits for the copy.
    int s = src_device.index, d = dst_device.index;
    check_device(s);
    check_device(d);
    static std::once_flag peer_once;
    std::call_once(peer_once, [] {
      for (int i = 0; i < device_count(); ++i)
        for (int j = 0; j < device_count(); ++j)
          if (i != j) enable_peer_access(i, j);
    });
    stream_wait(s, d);
    {
      DeviceGuard guard(s);
      TP_CUDA_CHECK(cudaMemcpyPeerAsync(dst, d, src, s, bytes, stream(s)));
    }
    stream_wait(d, s);
  }
}

void CudaBackend::fill(float* dst, int64_t n, float value) const {
  if (n <= 0) return;
  int d = device_of(dst);
  DeviceGuard guard(d);
  launch_fill(dst, n, value, stream(d));
}

void CudaBackend::convert(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                          int64_t n) const {
  if (n <= 0) return;
  int d = device_of(dst);
  DeviceGuard guard(d);
  if (src_dtype == dst_dtype) {
    TP_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * element_size(src_dtype),
                                  cudaMemcpyDeviceToDevice, stream(d)));
  } else if (src_dtype == DType::Float32) {
    launch_float_to_bfloat16(static_cast<const float*>(src), static_cast<uint16_t*>(dst), n,
                             stream(d));
  } else {
    launch_bfloat16_to_float(static_cast<const uint16_t*>(src), static_cast<float*>(dst), n,
                             stream(d));
  }
}

void CudaBackend::synchronize() const { synchronize_all(); }

void CudaBackend::binary(BinaryOp op, const float* a, const int64_t* a_strides, const float* b,
                         const int64_t* b_strides, float* out, const int64_t* shape,
                         int rank) const {
  int d = device_of(out);
  DeviceGuard guard(d);
  launch_binary(op, a, a_strides, b, b_strides, out, shape, rank, stream(d));
}

void CudaBackend::affine(const float* x, float* out, int64_t n, float alpha, float beta) const {
  if (n <= 0) return;
  int d = device_of(out);
  DeviceGuard guard(d);
  launch_affine(x, out, n, alpha, beta, stream(d));
}

void CudaBackend::unary(UnaryOp op, const float* x, float* y, int64_t n) const {
  if (n <= 0) return;
  int d = device_of(y);
  DeviceGuard guard(d);
  launch_unary(op, x, y, n, stream(d));
}

void CudaBackend::unary_backward(UnaryOp op, const float* x, const float* y, const float* gy,
                                 float* gx, int64_t n) const {
  if (n <= 0) return;
  int d = device_of(gx);
  DeviceGuard guard(d);
  launch_unary_backward(op, x, y, gy, gx, n, stream(d));
}

void CudaBackend::sum_dim(const float* x, float* out, int64_t outer, int64_t reduce,
                          int64_t inner) const {
  if (outer <= 0 || inner <= 0) return;
  int d = device_of(out);
  DeviceGuard guard(d);
  launch_sum_dim(x, out, outer, reduce, inner, stream(d));
}

}  // namespace cuda

const Backend& cuda_backend() {
  static cuda::CudaBackend backend;
  return backend;
}

}  // namespace tensorplay
