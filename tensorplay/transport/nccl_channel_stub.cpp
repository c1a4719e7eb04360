// The NCCL channel in a build without CUDA or NCCL: nothing is available and making a channel is
// a clear error, so code that names NcclChannel compiles and links everywhere.
#include "tensorplay/transport/nccl_channel.h"

namespace tensorplay::transport {

namespace {

const char* const kNotBuilt =
    "nccl channel: tensorplay was built without NCCL; rebuild with the CUDA toolkit and NCCL "
    "(TENSORPLAY_CUDA=ON) or use the ucx channel";

}  // namespace

struct NcclChannel::Impl {};

bool nccl_available() { return false; }

std::vector<uint8_t> nccl_unique_id() { throw TransferError(kNotBuilt); }

NcclChannel::NcclChannel(int rank, int world_size, Device device,
                         const std::vector<std::vector<uint8_t>>& /*ids*/,
                         std::chrono::milliseconds /*connect_timeout*/)
    : rank_(rank), world_size_(world_size), device_(device) {
  throw TransferError(kNotBuilt);
}

NcclChannel::~NcclChannel() = default;

std::vector<TensorDescriptor> NcclChannel::send(int /*peer*/, const TransferKey& /*key*/,
                                                std::vector<Tensor> /*tensors*/) {
  throw TransferError(kNotBuilt);
}

void NcclChannel::post_receive(int /*peer*/, const TransferKey& /*key*/,
                               std::vector<TensorDescriptor> /*descriptors*/, Device /*device*/,
                               std::chrono::milliseconds /*timeout*/, ReceiveDone done) {
  done({}, kNotBuilt);
}

size_t NcclChannel::pending() const { return 0; }

void NcclChannel::cancel_receive(int /*peer*/, const TransferKey& /*key*/) {}

void NcclChannel::cancel_all() {}

}  // namespace tensorplay::transport
