// Channel: the data plane between ranks. A sender posts tensors for a peer rank under a key and
// gets descriptors to put in its control message; the receiver posts a receive for them.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tensorplay/transport/tensor_descriptor.h"
#include "tensorplay/transport/transfer_key.h"

namespace tensorplay::transport {

/// Thrown when a transfer fails or does not complete in time.
class TransferError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Completion of a posted receive: the tensors, or (when `error` is not empty) why none came.
using ReceiveDone = std::function<void(std::vector<Tensor> tensors, std::string error)>;

/// Called on the channel's own thread for each small message that arrives for a stream: the
/// sending rank and the bytes. It must not block.
using MessageHandler = std::function<void(int peer, std::string_view bytes)>;

/// One implementation per transport (local, UCX, NCCL), all behind the same interface. Peers are
/// ranks of the process group the channel was made for (ignored by the in-process channel).
class Channel {
 public:
  virtual ~Channel() = default;
  /// True when the channel also carries small messages (send_message, set_message_handler).
  virtual bool carries_messages() const { return false; }
  /// Sends `bytes` (a small message: descriptors, not tensors) to rank `peer` for `stream`;
  /// never waits for the receiver. Throws TransferError where messages are not carried.
  virtual void send_message(int peer, uint32_t stream, std::string bytes);
  /// Routes messages of `stream` to `handler` (null: drops them from now on; when this returns,
  /// no call of the old handler is still running). Messages of a stream without a handler are
  /// dropped.
  virtual void set_message_handler(uint32_t stream, MessageHandler handler);
  /// Transport name for messages and logs ("local", "ucx", "nccl").
  virtual std::string name() const = 0;
  /// Posts `tensors` (at most kMaxTransferTensors) for rank `peer` under `key`; returns their
  /// descriptors. Never waits for the receiver: the channel keeps the tensors alive until their
  /// bytes have left. Throws TransferError when the transfer has too many tensors.
  virtual std::vector<TensorDescriptor> send(int peer, const TransferKey& key,
                                             std::vector<Tensor> tensors) = 0;
  /// Posts a receive of what rank `peer` sent under `key` (described by `descriptors`), placed on
  /// `device`. `done` is called exactly once, on any thread (possibly before this returns): with
  /// the tensors, or with an error naming the key when the transfer fails, is cancelled, or has
  /// not completed within `timeout`.
  virtual void post_receive(int peer, const TransferKey& key,
                            std::vector<TensorDescriptor> descriptors, Device device,
                            std::chrono::milliseconds timeout, ReceiveDone done) = 0;
  /// Tensors posted and not yet received or sent (for leak checks and error messages).
  virtual size_t pending() const = 0;
  /// Ends the receive posted for (`peer`, `key`) if it has not completed: its callback gets an
  /// error saying it timed out. Does nothing when it already completed.
  virtual void cancel_receive(int peer, const TransferKey& key) = 0;
  /// Drops everything posted; pending receives complete with an error (after a failed step).
  virtual void cancel_all() = 0;
  /// Drops what was posted under `stream` (one schedule's traffic on a shared channel): its
  /// pending receives complete with an error. The default cancels nothing.
  virtual void cancel_stream(uint32_t stream);
  /// Rank `peer` is gone (`why`): its pending receives complete with an error naming it, sends
  /// to it are dropped and later ones fail at once. The default does nothing.
  virtual void drop_peer(int peer, const std::string& why);

  /// Posts a receive and waits for it: the tensors, or TransferError naming the key.
  std::vector<Tensor> receive(int peer, const TransferKey& key,
                              std::vector<TensorDescriptor> descriptors, Device device,
                              std::chrono::milliseconds timeout);
};

}  // namespace tensorplay::transport
