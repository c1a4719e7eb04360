// Channel: the data plane between two stages. A sender posts tensors under a tag and gets
// descriptors to put in its control message; the receiver turns descriptors back into tensors.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "transport/tensor_descriptor.h"

namespace tensorplay::transport {

/// Thrown when a transfer fails or does not complete in time.
class TransferError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One implementation per transport (local, UCX, NCCL), all behind the same interface.
class Channel {
 public:
  virtual ~Channel() = default;
  /// Transport name for messages and logs ("local", "ucx", "nccl").
  virtual std::string name() const = 0;
  /// Posts `tensors` under `tag`; returns their descriptors. Does not wait for the receiver.
  virtual std::vector<TensorDescriptor> send(const TransferTag& tag,
                                             std::vector<Tensor> tensors) = 0;
  /// The tensors posted under `tag`, placed on `device`. Waits at most `timeout`, then throws
  /// TransferError naming the tag.
  virtual std::vector<Tensor> receive(const TransferTag& tag,
                                      const std::vector<TensorDescriptor>& descriptors,
                                      Device device, std::chrono::milliseconds timeout) = 0;
  /// Tensors posted and not yet received (for leak checks and error messages).
  virtual size_t pending() const = 0;
};

}  // namespace tensorplay::transport
