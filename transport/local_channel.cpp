// In-process channel: a tag-keyed table of posted tensors.
#include "transport/local_channel.h"

namespace tensorplay::transport {

std::vector<TensorDescriptor> LocalChannel::send(const TransferTag& tag,
                                                 std::vector<Tensor> tensors) {
  std::vector<TensorDescriptor> descriptors;
  for (const Tensor& t : tensors) descriptors.push_back(describe(t));
  {
    std::lock_guard lock(mutex_);
    auto [it, inserted] = slots_.emplace(tag.key(), std::move(tensors));
    if (!inserted)
      throw TransferError("local channel: " + to_string(tag) +
                          " was sent twice without being received");
  }
  posted_.notify_all();
  return descriptors;
}

std::vector<Tensor> LocalChannel::receive(const TransferTag& tag,
                                          const std::vector<TensorDescriptor>& descriptors,
                                          Device device, std::chrono::milliseconds timeout) {
  std::vector<Tensor> tensors;
  {
    std::unique_lock lock(mutex_);
    if (!posted_.wait_for(lock, timeout, [&] { return slots_.count(tag.key()) > 0; }))
      throw TransferError("local channel: nothing arrived for " + to_string(tag) + " within " +
                          std::to_string(timeout.count()) + " ms");
    auto it = slots_.find(tag.key());
    tensors = std::move(it->second);
    slots_.erase(it);
  }
  if (!descriptors.empty() && descriptors.size() != tensors.size())
    throw TransferError("local channel: " + to_string(tag) + " carries " +
                        std::to_string(tensors.size()) + " tensors, the descriptor names " +
                        std::to_string(descriptors.size()));
  for (Tensor& t : tensors)
    if (t.defined() && t.device() != device) t = t.to(device);  // peer copy between devices
  return tensors;
}

size_t LocalChannel::pending() const {
  std::lock_guard lock(mutex_);
  return slots_.size();
}

void LocalChannel::clear() {
  std::lock_guard lock(mutex_);
  slots_.clear();
}

}  // namespace tensorplay::transport
