// The pinned staging ring's bookkeeping (staging_ring.h): slots taken in turn, each refilled only
// once the device has read it.
#include "tensorplay/cuda/staging_ring.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tensorplay::cuda {

StagingRing::StagingRing(StagingDevice& device, size_t slot_bytes, int slots)
    : device_(device), slot_bytes_(slot_bytes), slots_(slots) {
  if (slot_bytes == 0 || slots < 1)
    throw std::invalid_argument("staging ring: needs at least one slot of at least one byte, not " +
                                std::to_string(slots) + " of " + std::to_string(slot_bytes));
}

void StagingRing::copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  if (buffers_.empty()) {
    for (int s = 0; s < slots_; ++s)
      buffers_.push_back(static_cast<char*>(device_.allocate_pinned(slot_bytes_)));
    in_flight_.assign(static_cast<size_t>(slots_), false);
  }
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  for (size_t done = 0; done < bytes;) {
    const size_t piece = std::min(slot_bytes_, bytes - done);
    const int slot = next_;
    next_ = (next_ + 1) % slots_;
    if (in_flight_[static_cast<size_t>(slot)]) {
      device_.wait_slot(slot);
      ++waits_;
    }
    std::memcpy(buffers_[static_cast<size_t>(slot)], in + done, piece);
    device_.queue_copy(out + done, buffers_[static_cast<size_t>(slot)], piece, slot);
    in_flight_[static_cast<size_t>(slot)] = true;
    done += piece;
  }
}

size_t StagingRing::waits() const {
  std::lock_guard lock(mutex_);
  return waits_;
}

}  // namespace tensorplay::cuda
