// Tests for host_memory.h: freed host blocks of cached sizes are reused, up to the limit.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

namespace {
// Restores the default limit when a test ends.
struct LimitGuard {
  size_t saved = tp::host_memory_stats().cache_limit;
  ~LimitGuard() { tp::set_host_cache_limit(saved); }
};
}  // namespace

TEST_CASE("a freed large host block is handed out again", "[host_memory]") {
  LimitGuard guard;
  tp::set_host_cache_limit(size_t{64} << 20);
  tp::host_empty_cache();
  const void* first = nullptr;
  {
    tp::Tensor t = tp::empty({1 << 18});  // 1 MiB
    first = t.raw_data();
  }
  tp::HostMemoryStats freed = tp::host_memory_stats();
  CHECK(freed.cached_bytes == size_t{1} << 20);
  tp::Tensor again = tp::empty({(1 << 18) - 100});  // same size class
  CHECK(again.raw_data() == first);
  CHECK(tp::host_memory_stats().cache_hits == freed.cache_hits + 1);
  CHECK(tp::host_memory_stats().cached_bytes == 0);
}

TEST_CASE("the host cache keeps no more than its limit, and none at 0", "[host_memory]") {
  LimitGuard guard;
  tp::set_host_cache_limit(size_t{1} << 20);
  tp::host_empty_cache();
  {
    tp::Tensor a = tp::empty({1 << 18}), b = tp::empty({1 << 18});  // 1 MiB each
  }
  CHECK(tp::host_memory_stats().cached_bytes == size_t{1} << 20);
  tp::set_host_cache_limit(0);
  CHECK(tp::host_memory_stats().cached_bytes == 0);
  { tp::Tensor c = tp::empty({1 << 18}); }
  CHECK(tp::host_memory_stats().cached_bytes == 0);
}

TEST_CASE("allocated and peak bytes follow live host storages", "[host_memory]") {
  tp::host_reset_peak_memory_stats();
  tp::HostMemoryStats before = tp::host_memory_stats();
  {
    tp::Tensor big = tp::empty({1 << 18});  // 1 MiB: a cached size class
    tp::Tensor small = tp::empty({100});    // 400 bytes, counted as asked
    CHECK(tp::host_memory_stats().allocated_bytes == before.allocated_bytes + (1 << 20) + 400);
  }
  tp::HostMemoryStats after = tp::host_memory_stats();
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(after.peak_allocated_bytes == before.allocated_bytes + (1 << 20) + 400);
}

TEST_CASE("small host tensors bypass the cache", "[host_memory]") {
  LimitGuard guard;
  tp::set_host_cache_limit(size_t{64} << 20);
  tp::host_empty_cache();
  tp::HostMemoryStats before = tp::host_memory_stats();
  { tp::Tensor small = tp::ones({100}); }
  tp::HostMemoryStats after = tp::host_memory_stats();
  CHECK(after.cached_bytes == 0);
  CHECK(after.cache_misses == before.cache_misses);
}

TEST_CASE("small host blocks are 64-byte aligned and whole, however malloc places them",
          "[host_memory]") {
  std::vector<tp::Tensor> live;
  for (int64_t n : {1, 2, 3, 5, 15, 16, 17, 63, 64, 65, 100, 255, 1000, 1023}) {
    tp::Tensor t = tp::empty({n});  // float32: 4 to 4092 bytes, under the cached sizes
    REQUIRE(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
    float* p = static_cast<float*>(t.raw_data());
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(n * 10000 + i);
    live.push_back(t);
  }
  // Neighbours did not overwrite each other (nor the pointers kept before each block).
  for (const tp::Tensor& t : live) {
    const int64_t n = t.numel();
    const float* p = static_cast<const float*>(t.raw_data());
    for (int64_t i = 0; i < n; ++i) REQUIRE(p[i] == static_cast<float>(n * 10000 + i));
  }
  live.clear();  // every block goes back to malloc through the pointer kept before it
}

TEST_CASE("an impossible host allocation is a clear error and leaves the figures alone",
          "[host_memory]") {
  tp::host_reset_peak_memory_stats();
  tp::HostMemoryStats before = tp::host_memory_stats();
  // 2^62 bytes: countable, but no machine has them.
  CHECK_THROWS_WITH(tp::empty({int64_t{1} << 60}),
                    Catch::Contains("out of memory") && Catch::Contains("cpu"));
  // 2^63 bytes: not even countable in int64.
  CHECK_THROWS_AS(tp::empty({int64_t{1} << 61}), std::invalid_argument);
  tp::HostMemoryStats after = tp::host_memory_stats();
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(after.peak_allocated_bytes == before.peak_allocated_bytes);
}
