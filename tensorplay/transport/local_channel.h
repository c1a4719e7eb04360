// The in-process channel: the receiver takes the sender's tensors themselves (no copy), or a
// device-to-device copy when sender and receiver sit on different devices of one process.
#pragma once

#include <mutex>
#include <unordered_map>

#include "tensorplay/transport/channel.h"

namespace tensorplay::transport {

/// Hands tensor storage from sender to receiver inside one process. A receive posted after its
/// send completes at once, on the caller's thread; one posted before waits for the send.
class LocalChannel final : public Channel {
 public:
  std::string name() const override { return "local"; }
  std::vector<TensorDescriptor> send(int peer, const TransferKey& key,
                                     std::vector<Tensor> tensors) override;
  void post_receive(int peer, const TransferKey& key, std::vector<TensorDescriptor> descriptors,
                    Device device, std::chrono::milliseconds timeout, ReceiveDone done) override;
  size_t pending() const override;
  void cancel_receive(int peer, const TransferKey& key) override;
  void cancel_all() override;

 private:
  struct Waiter {
    std::vector<TensorDescriptor> descriptors;
    Device device;
    ReceiveDone done;
  };
  void deliver(const TransferKey& key, std::vector<Tensor> tensors, Waiter waiter);

  mutable std::mutex mutex_;
  std::unordered_map<TransferKey, std::vector<Tensor>, TransferKeyHash>
      slots_;                                                         // sent, not yet received
  std::unordered_map<TransferKey, Waiter, TransferKeyHash> waiters_;  // posted, not yet sent
};

}  // namespace tensorplay::transport
