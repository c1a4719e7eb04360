// The NCCL channel's public API: checks its arguments, queues transfers on their links
// (nccl_channel.cpp runs them).
#include "tensorplay/base/knobs.h"
#include "tensorplay/core/core_knobs.h"
#include "tensorplay/transport/detail/nccl_channel_impl.h"

namespace tensorplay::transport {

using detail::deadline_after;
using detail::direction_name;
using detail::direction_of;
using detail::finish;
using detail::kCloseGrace;
using detail::kDrainTimeout;
using detail::kEnqueueTimeout;
using detail::kPollInterval;
using detail::nccl_message;
using detail::wait_ready;

// -- public API ----------------------------------------------------------------------------------

bool nccl_available() { return cuda_device_count() > 0; }

std::vector<uint8_t> nccl_unique_id() {
  if (!nccl_available())
    throw TransferError(
        "nccl channel: no CUDA device is visible, so NCCL cannot be used (check "
        "CUDA_VISIBLE_DEVICES, or use the ucx channel)");
  ncclUniqueId id;
  ncclResult_t result = ncclGetUniqueId(&id);
  if (result != ncclSuccess)
    throw TransferError("nccl channel: ncclGetUniqueId failed: " + nccl_message(result));
  const auto* bytes = reinterpret_cast<const uint8_t*>(id.internal);
  return std::vector<uint8_t>(bytes, bytes + sizeof(id.internal));
}

NcclChannel::NcclChannel(int rank, int world_size, Device device,
                         const std::vector<std::vector<uint8_t>>& ids, milliseconds connect_timeout)
    : rank_(rank), world_size_(world_size), device_(device) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw std::invalid_argument("nccl channel: rank " + std::to_string(rank) +
                                " is not a rank of a group of " + std::to_string(world_size));
  if (!device.is_cuda())
    throw std::invalid_argument("nccl channel: needs a CUDA device, not " + to_string(device));
  if (ids.size() != kDirections)
    throw std::invalid_argument("nccl channel: needs two unique ids (forward and backward), got " +
                                std::to_string(ids.size()));
  for (const auto& id : ids)
    if (id.size() != NCCL_UNIQUE_ID_BYTES)
      throw std::invalid_argument("nccl channel: a unique id has " + std::to_string(id.size()) +
                                  " bytes, NCCL's have " + std::to_string(NCCL_UNIQUE_ID_BYTES) +
                                  "; make them with nccl_unique_id()");
  if (ids[0] == ids[1])
    throw std::invalid_argument(
        "nccl channel: the forward and backward unique ids are the same; make two");
  if (!nccl_available())
    throw TransferError(
        "nccl channel: no CUDA device is visible, so NCCL cannot be used (check "
        "CUDA_VISIBLE_DEVICES, or use the ucx channel)");
  cuda::check_device(device.index);
  // Read after the first CUDA call, which sets it when unset (cuda::device_count).
  if (std::string problem = detail::hardware_queue_problem(
          world_size, static_cast<int>(knob_int(kCudaDeviceMaxConnectionsKnob)));
      !problem.empty())
    throw std::invalid_argument("nccl channel: " + problem);
  impl_ = std::make_unique<Impl>(rank, world_size, device.index);
  impl_->open(ids, connect_timeout);
}

NcclChannel::~NcclChannel() = default;

std::vector<TensorDescriptor> NcclChannel::send(int peer, const TransferKey& key,
                                                std::vector<Tensor> tensors) {
  if (peer < 0 || peer >= world_size_ || peer == rank_)
    throw std::invalid_argument("nccl channel: rank " + std::to_string(rank_) +
                                " cannot send to rank " + std::to_string(peer) + " (group of " +
                                std::to_string(world_size_) + ")");
  std::vector<TensorDescriptor> descriptors;
  bool has_bytes = false;
  for (Tensor& t : tensors) {
    descriptors.push_back(describe(t));
    if (!t.defined()) continue;
    // Hold the bytes, not the autograd history behind them.
    t = t.device() == device_ ? t.detach() : t.detach().to(device_);
    has_bytes = has_bytes || t.nbytes() > 0;
  }
  Transfer transfer;
  transfer.peer = peer;
  transfer.key = key;
  if (!has_bytes) {
    // Nothing for NCCL to move: the receiver, reading the same descriptors, queues nothing too.
    if (std::string failure = impl_->failed(); !failure.empty())
      throw TransferError("nccl channel: " + transfer.describe() +
                          " refused: the channel failed earlier (" + failure + ")");
    return descriptors;
  }
  transfer.tensors = std::move(tensors);
  std::string error = impl_->issue(impl_->lane(direction_of(key), peer, true), std::move(transfer));
  if (!error.empty()) throw TransferError(error);
  return descriptors;
}

void NcclChannel::post_receive(int peer, const TransferKey& key,
                               std::vector<TensorDescriptor> descriptors, Device device,
                               milliseconds timeout, ReceiveDone done) {
  if (peer < 0 || peer >= world_size_ || peer == rank_)
    throw std::invalid_argument("nccl channel: rank " + std::to_string(rank_) +
                                " cannot receive from rank " + std::to_string(peer) +
                                " (group of " + std::to_string(world_size_) + ")");
  if (device != device_)
    throw std::invalid_argument("nccl channel: receives land on " + to_string(device_) +
                                ", the channel's device, not on " + to_string(device));
  Transfer transfer;
  transfer.receive = true;
  transfer.peer = peer;
  transfer.key = key;
  transfer.timeout = timeout;
  transfer.deadline = deadline_after(timeout);
  bool has_bytes = false;
  for (size_t i = 0; i < descriptors.size(); ++i) {
    const TensorDescriptor& d = descriptors[i];
    if (!d.defined) {
      transfer.tensors.emplace_back();
      continue;
    }
    Tensor t = tensorplay::empty(d.shape, {.dtype = d.dtype, .device = device_});
    if (t.nbytes() != d.bytes)
      throw std::invalid_argument("nccl channel: tensor " + std::to_string(i) + " of " +
                                  to_string(key) + " is described as " + std::to_string(d.bytes) +
                                  " bytes, but " + tensorplay::to_string(d.shape) + " " +
                                  to_string(d.dtype) + " holds " + std::to_string(t.nbytes()));
    has_bytes = has_bytes || t.nbytes() > 0;
    transfer.tensors.push_back(std::move(t));
  }
  if (std::string failure = impl_->failed(); !failure.empty()) {
    done({}, "nccl channel: " + transfer.describe() + " refused: the channel failed earlier (" +
                 failure + ")");
    return;
  }
  if (!has_bytes) {
    done(std::move(transfer.tensors), {});
    return;
  }
  transfer.done = std::move(done);
  // Reports errors through `done`.
  impl_->issue(impl_->lane(direction_of(key), peer, false), std::move(transfer));
}

size_t NcclChannel::pending() const {
  std::lock_guard lock(impl_->mutex);
  size_t count = 0;
  impl_->for_each_lane([&](const Lane& lane) { count += lane.queue.size(); });
  return count;
}

void NcclChannel::cancel_receive(int peer, const TransferKey& key) {
  if (peer < 0 || peer >= world_size_ || peer == rank_) return;  // nothing was posted there
  bool in_flight = false;
  {
    std::lock_guard lock(impl_->mutex);
    for (const Transfer& t : impl_->lane(direction_of(key), peer, false).queue)
      if (t.receive && t.peer == peer && t.key == key) in_flight = true;
  }
  if (!in_flight) return;
  std::string message = "nccl channel: nothing arrived for " + to_string(key) + " from rank " +
                        std::to_string(peer) +
                        " in time; the NCCL communicators were aborted, so this channel cannot "
                        "be used again";
  impl_->fail(
      "the receive of " + to_string(key) + " from rank " + std::to_string(peer) + " was cancelled",
      {}, Impl::Culprit{peer, key, message});
}

void NcclChannel::cancel_all() {
  bool in_flight = false;
  {
    std::lock_guard lock(impl_->mutex);
    in_flight = impl_->busy();
  }
  if (in_flight) impl_->fail("cancel_all() was called with transfers in flight");
}

}  // namespace tensorplay::transport
