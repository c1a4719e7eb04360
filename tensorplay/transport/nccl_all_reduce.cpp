// The NCCL all-reduce: a nonblocking communicator with its own stream; each call waits on the
// tensor stream, queues ncclAllReduce and polls for completion with a deadline.
#include "tensorplay/transport/nccl_all_reduce.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

#include "tensorplay/cuda/cuda_check.h"
#include "tensorplay/cuda/cuda_device.h"
#include "tensorplay/transport/detail/nccl_links.h"
#include "tensorplay/transport/detail/nccl_support.h"

namespace tensorplay::transport {

struct NcclAllReduce::Impl {
  int rank = 0;
  int size = 0;
  int device = 0;
  std::chrono::milliseconds timeout{0};
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t produced = nullptr;
  bool failed = false;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  // Frees whatever was made, also when the constructor threw half way (the stream and event were
  // leaked then).
  ~Impl() { release(); }
  void release();

  std::string where() const {
    return "all-reduce member " + std::to_string(rank) + " of " + std::to_string(size) +
           " on cuda:" + std::to_string(device);
  }
};

NcclAllReduce::NcclAllReduce(int rank, int size, Device device, const std::vector<uint8_t>& id,
                             std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  if (!device.is_cuda())
    throw std::invalid_argument("nccl all-reduce: device " + to_string(device) + " is not a GPU");
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument("nccl all-reduce: rank " + std::to_string(rank) +
                                " is not in a group of " + std::to_string(size));
  ncclUniqueId unique;
  if (id.size() != sizeof(unique.internal))
    throw std::invalid_argument("nccl all-reduce: the unique id has " + std::to_string(id.size()) +
                                " bytes, expected " + std::to_string(sizeof(unique.internal)));
  std::memcpy(unique.internal, id.data(), sizeof(unique.internal));
  Impl& im = *impl_;
  im.rank = rank;
  im.size = size;
  im.device = device.index;
  im.timeout = timeout;
  cuda::DeviceGuard guard(im.device);
  TP_CUDA_CHECK(cudaStreamCreateWithFlags(&im.stream, cudaStreamNonBlocking));
  TP_CUDA_CHECK(cudaEventCreateWithFlags(&im.produced, cudaEventDisableTiming));
  int sm_count = 0;
  TP_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, im.device));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // joining has a deadline
  // Bounded like the NCCL channel's links, so this and every link can be resident at once.
  config.minCTAs = 1;
  config.maxCTAs = detail::max_ctas_per_communicator(sm_count, 2);
  ncclResult_t result = ncclCommInitRankConfig(&im.comm, size, unique, rank, &config);
  const auto deadline = detail::deadline_after(timeout);
  if (result == ncclInProgress) result = detail::wait_ready(im.comm, deadline);
  if (result != ncclSuccess) {
    if (im.comm != nullptr) ncclCommAbort(im.comm);
    im.comm = nullptr;
    throw TransferError(
        "nccl all-reduce: " + im.where() +
        (result == ncclInProgress
             ? ": not every member joined within " + std::to_string(timeout.count()) + " ms"
             : ": joining failed: " + detail::nccl_message(result)));
  }
}

void NcclAllReduce::Impl::release() {
  if (comm == nullptr && stream == nullptr && produced == nullptr) return;
  std::optional<cuda::DeviceGuard> guard;
  try {
    guard.emplace(device);
  } catch (const std::exception&) {
    // A broken CUDA context: free what can be freed anyway.
  }
  if (comm != nullptr) {
    if (failed)
      ncclCommAbort(comm);
    else
      ncclCommDestroy(comm);
    comm = nullptr;
  }
  if (stream != nullptr) {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
    stream = nullptr;
  }
  if (produced != nullptr) cudaEventDestroy(produced);
  produced = nullptr;
}

NcclAllReduce::~NcclAllReduce() = default;

void NcclAllReduce::all_reduce(Tensor& flat) {
  Impl& im = *impl_;
  if (!flat.defined() || !flat.is_cuda() || flat.device().index != im.device)
    throw std::invalid_argument(
        "nccl all-reduce: " + im.where() +
        ": the tensor must be defined and on cuda:" + std::to_string(im.device));
  if (flat.dtype() != DType::Float32 && flat.dtype() != DType::BFloat16)
    throw std::invalid_argument("nccl all-reduce: only float32 and bfloat16 tensors are summed");
  if (im.failed)
    throw TransferError("nccl all-reduce: " + im.where() +
                        ": the communicator was aborted by an earlier failure");
  cuda::DeviceGuard guard(im.device);
  const auto deadline = detail::deadline_after(im.timeout);
  TP_CUDA_CHECK(cudaEventRecord(im.produced, cuda::stream(im.device)));
  TP_CUDA_CHECK(cudaStreamWaitEvent(im.stream, im.produced, 0));
  const ncclDataType_t type = flat.dtype() == DType::Float32 ? ncclFloat32 : ncclBfloat16;
  try {
    detail::finish(
        ncclAllReduce(flat.raw_data(), flat.raw_data(), static_cast<size_t>(flat.numel()), type,
                      ncclSum, im.comm, im.stream),
        im.comm, deadline, im.where() + ": queueing the all-reduce");
    cudaError_t status;
    while ((status = cudaStreamQuery(im.stream)) == cudaErrorNotReady) {
      if (detail::Clock::now() >= deadline)
        throw TransferError("nccl all-reduce: " + im.where() +
                            ": a member did not take part within " +
                            std::to_string(im.timeout.count()) + " ms");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    TP_CUDA_CHECK(status);
  } catch (...) {
    im.failed = true;
    ncclCommAbort(im.comm);
    im.comm = nullptr;
    throw;
  }
  // Later work on the tensor stream sees the sum.
  TP_CUDA_CHECK(cudaEventRecord(im.produced, im.stream));
  TP_CUDA_CHECK(cudaStreamWaitEvent(cuda::stream(im.device), im.produced, 0));
}

}  // namespace tensorplay::transport
