// The NCCL all-reduce in a build without CUDA or NCCL: making one is a clear error, so code that
// names it compiles and links everywhere.
#include "tensorplay/transport/nccl_all_reduce.h"

namespace tensorplay::transport {

struct NcclAllReduce::Impl {};

NcclAllReduce::NcclAllReduce(int /*rank*/, int /*size*/, Device /*device*/,
                             const std::vector<uint8_t>& /*id*/,
                             std::chrono::milliseconds /*timeout*/) {
  throw TransferError(
      "nccl all-reduce: tensorplay was built without NCCL; rebuild with the CUDA toolkit and NCCL "
      "(TENSORPLAY_CUDA=ON), or keep the gradients in host memory");
}

NcclAllReduce::~NcclAllReduce() = default;

void NcclAllReduce::all_reduce(Tensor& /*flat*/) {}

}  // namespace tensorplay::transport
