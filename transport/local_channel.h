// The in-process channel: the receiver takes the sender's tensors themselves (no copy), or a
// device-to-device copy when the two stages sit on different devices of one process.
#pragma once

#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "transport/channel.h"

namespace tensorplay::transport {

/// Hands tensor storage from sender to receiver inside one process.
class LocalChannel final : public Channel {
 public:
  std::string name() const override { return "local"; }
  std::vector<TensorDescriptor> send(const TransferTag& tag, std::vector<Tensor> tensors) override;
  std::vector<Tensor> receive(const TransferTag& tag,
                              const std::vector<TensorDescriptor>& descriptors, Device device,
                              std::chrono::milliseconds timeout) override;
  size_t pending() const override;
  /// Drops everything posted (after a failed step).
  void clear();

 private:
  mutable std::mutex mutex_;
  std::condition_variable posted_;
  std::unordered_map<uint64_t, std::vector<Tensor>> slots_;
};

}  // namespace tensorplay::transport
