// In-process channel: a key-indexed table of posted tensors and of receives waiting for them.
#include "tensorplay/transport/local_channel.h"

namespace tensorplay::transport {

std::vector<TensorDescriptor> LocalChannel::send(int /*peer*/, const TransferKey& key,
                                                 std::vector<Tensor> tensors) {
  std::vector<TensorDescriptor> descriptors;
  for (const Tensor& t : tensors) descriptors.push_back(describe(t));
  std::unique_lock lock(mutex_);
  if (auto w = waiters_.find(key); w != waiters_.end()) {
    Waiter waiter = std::move(w->second);
    waiters_.erase(w);
    lock.unlock();
    deliver(key, std::move(tensors), std::move(waiter));
    return descriptors;
  }
  auto [it, inserted] = slots_.emplace(key, std::move(tensors));
  if (!inserted)
    throw TransferError("local channel: " + to_string(key) +
                        " was sent twice without being received");
  return descriptors;
}

void LocalChannel::post_receive(int /*peer*/, const TransferKey& key,
                                std::vector<TensorDescriptor> descriptors, Device device,
                                std::chrono::milliseconds /*timeout*/, ReceiveDone done) {
  Waiter waiter{std::move(descriptors), device, std::move(done)};
  std::unique_lock lock(mutex_);
  auto it = slots_.find(key);
  if (it == slots_.end()) {
    // Inside one process a sender posts before it notifies, so a waiting receive is rare (tests,
    // or a caller that polls): it completes on send, or with an error on cancel.
    if (!waiters_.emplace(key, std::move(waiter)).second)
      throw TransferError("local channel: a receive for " + to_string(key) + " was posted twice");
    return;
  }
  std::vector<Tensor> tensors = std::move(it->second);
  slots_.erase(it);
  lock.unlock();
  deliver(key, std::move(tensors), std::move(waiter));
}

void LocalChannel::deliver(const TransferKey& key, std::vector<Tensor> tensors, Waiter waiter) {
  if (!waiter.descriptors.empty() && waiter.descriptors.size() != tensors.size()) {
    waiter.done({}, "local channel: " + to_string(key) + " carries " +
                        std::to_string(tensors.size()) + " tensors, the descriptor names " +
                        std::to_string(waiter.descriptors.size()));
    return;
  }
  try {
    for (Tensor& t : tensors)
      if (t.defined() && t.device() != waiter.device) t = t.to(waiter.device);  // peer copy
  } catch (const std::exception& e) {
    waiter.done({}, "local channel: copying " + to_string(key) + " failed: " + e.what());
    return;
  }
  waiter.done(std::move(tensors), {});
}

size_t LocalChannel::pending() const {
  std::lock_guard lock(mutex_);
  return slots_.size();
}

void LocalChannel::cancel_receive(int /*peer*/, const TransferKey& key) {
  std::unique_lock lock(mutex_);
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  Waiter waiter = std::move(it->second);
  waiters_.erase(it);
  lock.unlock();
  waiter.done({}, "local channel: nothing arrived for " + to_string(key) + " in time");
}

void LocalChannel::cancel_all() {
  std::unordered_map<TransferKey, Waiter, TransferKeyHash> waiters;
  {
    std::lock_guard lock(mutex_);
    slots_.clear();
    waiters.swap(waiters_);
  }
  for (auto& [key, waiter] : waiters) waiter.done({}, "local channel: receive cancelled");
}

}  // namespace tensorplay::transport
