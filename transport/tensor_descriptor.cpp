// Transfer tags and tensor descriptors.
#include "transport/tensor_descriptor.h"

namespace tensorplay::transport {

uint64_t TransferTag::key() const {
  return ((step & 0xffffffULL) << 40) | (static_cast<uint64_t>(stage & 0x7fff) << 25) |
         (static_cast<uint64_t>(direction == Direction::Backward) << 24) |
         (static_cast<uint64_t>(microbatch) & 0xffffffULL);
}

std::string to_string(const TransferTag& tag) {
  return "step " + std::to_string(tag.step) + " stage " + std::to_string(tag.stage) +
         (tag.direction == Direction::Forward ? " forward" : " backward") + " microbatch " +
         std::to_string(tag.microbatch);
}

TensorDescriptor describe(const Tensor& t) {
  if (!t.defined()) return {{}, DType::Float32, 0, false};
  return {t.shape(), t.dtype(), t.nbytes(), true};
}

}  // namespace tensorplay::transport
