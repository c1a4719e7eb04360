// Tests for cpu_threads.h: per-thread product thread counts, and products on two threads running
// at the same time (no library lock serialises them).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "tensorplay/base/knobs.h"
#include "tensorplay/core/core_knobs.h"
#include "tensorplay/core/cpu_threads.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("set_num_threads is per thread and rejects counts below one", "[cpu_threads]") {
  CHECK(tp::get_num_threads() >= 1);
  CHECK_THROWS_WITH(tp::set_num_threads(0), Catch::Contains("needs at least 1 thread, got 0"));
  tp::set_num_threads(3);
  CHECK(tp::get_num_threads() == 3);
  int other = 0;
  std::thread([&] {
    tp::set_num_threads(1);
    other = tp::get_num_threads();
  }).join();
  CHECK(other == 1);
  CHECK(tp::get_num_threads() == 3);  // the other thread's setting did not leak here
  tp::set_num_threads(1);
  CHECK_THROWS_WITH(tp::set_default_num_threads(0), Catch::Contains("at least 1 thread"));
  int before = 0;
  std::thread([&] { before = tp::get_num_threads(); }).join();
  tp::set_default_num_threads(before == 2 ? 3 : 2);
  std::thread([&] { other = tp::get_num_threads(); }).join();
  CHECK(other == (before == 2 ? 3 : 2));  // a thread that set nothing takes the process default
  CHECK(tp::get_num_threads() == 1);      // one that set its own keeps it
  tp::set_default_num_threads(before);
}

TEST_CASE("thread_share: each computing thread's share of the host's cores", "[cpu_threads]") {
  CHECK(tp::thread_share(16, 1, 1) == 16);  // alone on the host: every core
  CHECK(tp::thread_share(16, 1, 2) == 8);   // two stage actors in one process
  CHECK(tp::thread_share(16, 4, 1) == 4);   // LOCAL_WORLD_SIZE 4
  CHECK(tp::thread_share(16, 2, 3) == 2);   // 16 / 6, rounded down
  CHECK(tp::thread_share(2, 1, 2) == 1);
  CHECK(tp::thread_share(2, 1, 3) == 1);  // at least one, however many share
  CHECK(tp::thread_share(4, 8, 8) == 1);
  CHECK(tp::thread_share(0, 0, 0) == 1);                 // nonsense counts as one
  CHECK(tp::thread_share(4096, 1 << 20, 1 << 20) == 1);  // no overflow
}

TEST_CASE("with no setting a thread takes its share, and explicit settings win", "[cpu_threads]") {
  if (tp::knob_is_set(tp::kNumThreadsKnob)) {
    WARN("TENSORPLAY_NUM_THREADS is set, and it wins over the share: nothing to check");
    return;
  }
  tp::reset_default_num_threads();  // another test of this process may have set one
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  CHECK_THROWS_WITH(tp::set_compute_threads(0), Catch::Contains("at least 1 thread, got 0"));
  CHECK_THROWS_WITH(tp::set_ranks_on_host(0), Catch::Contains("at least 1 rank, got 0"));
  int alone = 0, shared = 0, on_busy_host = 0, explicit_count = 0;
  std::thread([&] { alone = tp::get_num_threads(); }).join();
  CHECK(alone == std::max(cores, 1));
  std::thread([&] {
    tp::set_compute_threads(2);
    shared = tp::get_num_threads();
    tp::set_ranks_on_host(2);
    on_busy_host = tp::get_num_threads();
    tp::set_ranks_on_host(1);
    tp::set_num_threads(5);
    explicit_count = tp::get_num_threads();
  }).join();
  CHECK(shared == tp::thread_share(cores, 1, 2));
  CHECK(on_busy_host == tp::thread_share(cores, 2, 2));
  CHECK(explicit_count == 5);
  std::thread([&] { alone = tp::get_num_threads(); }).join();
  CHECK(alone == std::max(cores, 1));  // the other thread's share stayed on it
  tp::set_default_num_threads(7);      // the process default wins over any share
  std::thread([&] {
    tp::set_compute_threads(4);
    shared = tp::get_num_threads();
  }).join();
  CHECK(shared == 7);
  tp::reset_default_num_threads();
  std::thread([&] { alone = tp::get_num_threads(); }).join();
  CHECK(alone == std::max(cores, 1));
}

namespace {

// Thread one runs one long product; thread two runs short products meanwhile and counts those
// that finish while the long one is in progress. A library lock held around products would let
// only the few that slip in before the long one takes the lock finish; without one, hundreds do,
// and time slicing needs no idle core, so a busy machine does not fail this.
int products_finished_during_a_long_one(bool long_is_primitive, int short_kind) {
  std::atomic<int> phase{0};  // 0 before the long product, 1 during it, 2 after
  std::atomic<bool> second_ready{false};
  int finished_during = 0;
  std::thread second([&] {
    tp::set_num_threads(1);
    tp::Tensor x = tp::ones({16, 128}), w = tp::ones({128, 128});
    tp::Tensor q = tp::ones({4, 32, 32}), k = tp::ones({4, 32, 32});
    auto run_short = [&] {
      if (short_kind == 0) tp::linear(x, w);  // A B^T: oneDNN's matmul primitive
      if (short_kind == 1) tp::matmul(x, w);  // A B: dnnl_sgemm
      if (short_kind == 2) tp::bmm(q, k);     // a batch: the matmul primitive
    };
    // Once before the long product starts: a first call on a thread may generate its kernel,
    // which on a loaded machine can outlast the whole long product.
    run_short();
    second_ready = true;
    while (phase.load() < 2) {
      run_short();
      if (phase.load() == 1) ++finished_during;
    }
  });
  tp::set_num_threads(1);
  tp::Tensor a = tp::ones({1024, 1536}), b = tp::ones({1536, 1536});
  // Once ahead, so the timed call's output comes from the allocator's cache and the time spent
  // outside the product (where short products may finish anyway) stays short.
  long_is_primitive ? tp::linear(a, b) : tp::matmul(a, b);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!second_ready && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  phase = 1;
  if (long_is_primitive)
    tp::linear(a, b);
  else
    tp::matmul(a, b);
  phase = 2;
  second.join();
  return finished_during;
}

}  // namespace

TEST_CASE("products on two threads run at the same time", "[cpu_threads]") {
  for (bool long_is_primitive : {false, true}) {
    for (int short_kind : {0, 1, 2}) {
      CAPTURE(long_is_primitive, short_kind);
      CHECK(products_finished_during_a_long_one(long_is_primitive, short_kind) >= 20);
    }
  }
}
