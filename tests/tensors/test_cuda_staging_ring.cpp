// The pinned staging ring (tensorplay/cuda/staging_ring.h) against a stand-in device whose copies
// run late, as a DMA engine's do: a slot refilled before the device read it would show in the
// bytes.
#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <memory>
#include <numeric>
#include <vector>

#include "tensorplay/cuda/staging_ring.h"

namespace {

namespace cuda = tensorplay::cuda;

// Copies queue up and run only when waited for or drained: each reads its pinned source then.
class LateDevice : public cuda::StagingDevice {
 public:
  void* allocate_pinned(size_t bytes) override {
    pinned_.push_back(std::make_unique<char[]>(bytes));
    return pinned_.back().get();
  }
  void queue_copy(void* dst, const void* src, size_t bytes, int slot) override {
    queued_.push_back({static_cast<char*>(dst), static_cast<const char*>(src), bytes, slot});
  }
  void wait_slot(int slot) override {
    // Runs copies in stream order up to the last one from `slot`.
    size_t last = queued_.size();
    for (size_t i = 0; i < queued_.size(); ++i)
      if (queued_[i].slot == slot) last = i;
    for (size_t i = 0; last < queued_.size() && i <= last; ++i) run_front();
  }
  void drain() {
    while (!queued_.empty()) run_front();
  }
  size_t queued() const { return queued_.size(); }
  size_t pinned_buffers() const { return pinned_.size(); }

 private:
  struct Copy {
    char* dst;
    const char* src;
    size_t bytes;
    int slot;
  };
  void run_front() {
    const Copy c = queued_.front();
    queued_.pop_front();
    std::copy(c.src, c.src + c.bytes, c.dst);
  }
  std::vector<std::unique_ptr<char[]>> pinned_;
  std::deque<Copy> queued_;
};

std::vector<char> pattern(size_t bytes, int seed) {
  std::vector<char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<char>((i * 31 + seed * 7) & 0xff);
  return v;
}

}  // namespace

TEST_CASE("staging ring: copies larger than the ring arrive whole, in order") {
  LateDevice device;
  cuda::StagingRing ring(device, 64, 3);
  std::vector<std::vector<char>> sources, targets;
  for (size_t bytes : {size_t{1000}, size_t{64}, size_t{1}, size_t{191}, size_t{500}}) {
    sources.push_back(pattern(bytes, static_cast<int>(sources.size())));
    targets.emplace_back(bytes, 0);
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    ring.copy_to_device(targets[i].data(), sources[i].data(), sources[i].size());
    // The caller may reuse its memory at once: the device reads the pinned copy.
    std::fill(sources[i].begin(), sources[i].end(), 0x55);
  }
  device.drain();
  for (size_t i = 0; i < targets.size(); ++i) {
    INFO("copy " << i);
    CHECK(targets[i] == pattern(targets[i].size(), static_cast<int>(i)));
  }
  CHECK(device.pinned_buffers() == 3);  // allocated once, on the first copy
  CHECK(ring.waits() > 0);
}

TEST_CASE("staging ring: a copy returns without waiting while slots are free") {
  LateDevice device;
  cuda::StagingRing ring(device, 256, 4);
  std::vector<char> a = pattern(300, 1), out(300, 0);
  ring.copy_to_device(out.data(), a.data(), a.size());  // two slots
  CHECK(ring.waits() == 0);
  CHECK(device.queued() == 2);  // nothing ran: no wait for the stream
  device.drain();
  CHECK(out == pattern(300, 1));
}

TEST_CASE("staging ring: nothing to copy queues nothing and a ring without slots is refused") {
  LateDevice device;
  cuda::StagingRing ring(device, 16, 2);
  ring.copy_to_device(nullptr, nullptr, 0);
  CHECK(device.queued() == 0);
  CHECK_THROWS_WITH(cuda::StagingRing(device, 0, 2), Catch::Contains("at least one slot"));
  CHECK_THROWS_AS(cuda::StagingRing(device, 16, 0), std::invalid_argument);
}
