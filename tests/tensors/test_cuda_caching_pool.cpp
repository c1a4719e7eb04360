// The CUDA caching allocator's pool over a stand-in device (no GPU needed): reuse, statistics,
// the out-of-memory retry, and that a release blocked in the device (cudaFree waiting for an NCCL
// kernel) does not hold up other threads' allocations and frees.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "tensorplay/cuda/caching_pool.h"

namespace {

using tensorplay::cuda::CachingPool;
using tensorplay::cuda::DeviceMemory;
using namespace std::chrono_literals;

// Two devices of `capacity` bytes each; a release can be made to block until let go.
class StandInDevice final : public DeviceMemory {
 public:
  explicit StandInDevice(size_t capacity) : capacity_(capacity) {}
  ~StandInDevice() override {
    for (void* p : live_) std::free(p);
  }
  int device_count() override { return 2; }
  void* allocate(int device, size_t bytes) override {
    std::lock_guard lock(mutex_);
    if (used_[device] + bytes > capacity_) return nullptr;
    used_[device] += bytes;
    void* p = std::malloc(bytes);
    live_.insert(p);
    sizes_[p] = bytes;
    return p;
  }
  void release(int device, void* block) override {
    {
      std::unique_lock lock(mutex_);
      ++releases_started_;
      started_.notify_all();
      let_go_.wait(lock, [this] { return !blocking_; });
      used_[device] -= sizes_[block];
      live_.erase(block);
    }
    std::free(block);
  }
  void block_releases() {
    std::lock_guard lock(mutex_);
    blocking_ = true;
  }
  void unblock_releases() {
    {
      std::lock_guard lock(mutex_);
      blocking_ = false;
    }
    let_go_.notify_all();
  }
  bool wait_release_started(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return started_.wait_for(lock, timeout, [this] { return releases_started_ > 0; });
  }

 private:
  size_t capacity_;
  std::mutex mutex_;
  std::condition_variable started_, let_go_;
  bool blocking_ = false;
  int releases_started_ = 0;
  size_t used_[2] = {0, 0};
  std::set<void*> live_;
  std::unordered_map<void*, size_t> sizes_;
};

}  // namespace

TEST_CASE("caching pool: a freed block is reused and counted") {
  StandInDevice device(1 << 20);
  CachingPool pool(device);
  void* a = pool.allocate(0, 1000);
  pool.deallocate(0, a, 1000);
  void* b = pool.allocate(0, 1024);  // same 512-byte size class
  CHECK(b == a);
  auto s = pool.stats(0);
  CHECK(s.malloc_calls == 1);
  CHECK(s.cache_hits == 1);
  CHECK(s.allocated_bytes == 1024);
  CHECK(s.cached_bytes == 0);
  CHECK(pool.stats(1).malloc_calls == 0);
  CHECK(pool.stats(7).malloc_calls == 0);
  pool.deallocate(0, b, 1024);
  pool.empty_cache();
  s = pool.stats(0);
  CHECK(s.free_calls == 1);
  CHECK(s.cached_bytes == 0);
  CHECK(s.peak_allocated_bytes == 1024);
}

TEST_CASE("caching pool: out of memory releases the cache and retries, then names the device") {
  StandInDevice device(4096);
  CachingPool pool(device);
  void* a = pool.allocate(1, 2048);
  pool.deallocate(1, a, 2048);       // cached: 2048 of the 4096 in use
  void* b = pool.allocate(1, 4096);  // fits only once the cached block is released
  CHECK(b != nullptr);
  CHECK(pool.stats(1).free_calls == 1);
  CHECK_THROWS_WITH(pool.allocate(1, 4096), Catch::Contains("CUDA out of memory on cuda:1"));
  pool.deallocate(1, b, 4096);
}

TEST_CASE("caching pool: a release blocked in the device does not block other threads") {
  StandInDevice device(1 << 20);
  CachingPool pool(device);
  void* cached = pool.allocate(0, 512);
  void* held = pool.allocate(0, 4096);
  pool.deallocate(0, cached, 512);
  device.block_releases();
  // empty_cache releases `cached`, and that release blocks (cudaFree waiting for the device).
  auto emptying = std::async(std::launch::async, [&] { pool.empty_cache(); });
  REQUIRE(device.wait_release_started(5s));
  // Meanwhile another thread allocates (a miss), returns a block, and takes it back (a hit).
  auto other = std::async(std::launch::async, [&] {
    void* p = pool.allocate(0, 8192);
    pool.deallocate(0, held, 4096);
    void* q = pool.allocate(0, 4096);
    pool.deallocate(0, p, 8192);
    pool.deallocate(0, q, 4096);
    return pool.stats(0).cache_hits;
  });
  bool other_finished = other.wait_for(5s) == std::future_status::ready;
  device.unblock_releases();  // let everything finish either way, so the test never hangs
  emptying.get();
  CHECK(other_finished);
  CHECK(other.get() == 1);
  auto s = pool.stats(0);
  CHECK(s.free_calls == 1);
  CHECK(s.allocated_bytes == 0);
}
