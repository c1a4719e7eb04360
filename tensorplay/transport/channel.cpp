// The blocking receive every channel offers, on top of its posted receive.
#include "tensorplay/transport/channel.h"

#include <condition_variable>
#include <mutex>
#include <optional>

namespace tensorplay::transport {

void Channel::send_message(int /*peer*/, uint32_t /*stream*/, std::string /*bytes*/) {
  throw TransferError(name() + " channel: does not carry messages (carries_messages() is false)");
}

void Channel::set_message_handler(uint32_t /*stream*/, MessageHandler /*handler*/) {
  throw TransferError(name() + " channel: does not carry messages (carries_messages() is false)");
}

std::vector<Tensor> Channel::receive(int peer, const TransferKey& key,
                                     std::vector<TensorDescriptor> descriptors, Device device,
                                     std::chrono::milliseconds timeout) {
  struct Result {
    std::mutex mutex;
    std::condition_variable cv;
    std::optional<std::pair<std::vector<Tensor>, std::string>> value;
  };
  auto result = std::make_shared<Result>();
  post_receive(peer, key, std::move(descriptors), device, timeout,
               [result](std::vector<Tensor> tensors, std::string error) {
                 {
                   std::lock_guard lock(result->mutex);
                   result->value.emplace(std::move(tensors), std::move(error));
                 }
                 result->cv.notify_all();
               });
  std::unique_lock lock(result->mutex);
  auto ready = [&] { return result->value.has_value(); };
  if (!result->cv.wait_for(lock, timeout, ready)) {
    lock.unlock();
    cancel_receive(peer, key);  // completes the receive with an error unless it just arrived
    lock.lock();
    if (!result->cv.wait_for(lock, std::chrono::seconds(1), ready))
      throw TransferError(name() + " channel: nothing arrived for " + to_string(key) + " within " +
                          std::to_string(timeout.count()) + " ms");
  }
  if (!result->value->second.empty()) throw TransferError(result->value->second);
  return std::move(result->value->first);
}

void Channel::cancel_stream(uint32_t /*stream*/) {}

void Channel::drop_peer(int /*peer*/, const std::string& /*why*/) {}

}  // namespace tensorplay::transport
