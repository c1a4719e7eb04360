// Tests for cpu_threads.h: per-thread product thread counts, and products on two threads running
// at the same time (no library lock serialises them).
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "tensors/cpu_threads.h"
#include "tensors/tensors.h"

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
