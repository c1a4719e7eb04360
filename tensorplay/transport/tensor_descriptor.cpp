// Transfer keys and tensor descriptors.
#include "tensorplay/transport/tensor_descriptor.h"

#include <cstdio>

#include "tensorplay/transport/transfer_key.h"

namespace tensorplay::transport {

std::string to_string(const TransferKey& key) {
  if (key.namer != nullptr) return key.namer(key);
  char hex[24];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(key.key));
  return "stream " + std::to_string(key.stream) + " key 0x" + hex;
}

TensorDescriptor describe(const Tensor& t) {
  if (!t.defined()) return {{}, DType::Float32, 0, false};
  return {t.shape(), t.dtype(), t.nbytes(), true};
}

}  // namespace tensorplay::transport
