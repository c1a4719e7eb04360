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

using Clock = std::chrono::steady_clock;

struct Interval {
  Clock::time_point start, end;
};

// Runs `repeats` products of `kind` on the calling thread, recording when each ran.
std::vector<Interval> timed_products(int kind, int repeats) {
  tp::set_num_threads(1);
  tp::Tensor x = tp::ones({16, 512}), w = tp::ones({512, 512});
  tp::Tensor q = tp::ones({8, 64, 64}), k = tp::ones({8, 64, 64});
  std::vector<Interval> out;
  for (int i = 0; i < repeats; ++i) {
    Interval iv;
    iv.start = Clock::now();
    for (int j = 0; j < 4; ++j) {
      if (kind == 0) tp::linear(x, w);  // A B^T (the matmul primitive)
      if (kind == 1) tp::matmul(x, w);  // A B (sgemm)
      if (kind == 2) tp::bmm(q, k);     // a batch
    }
    iv.end = Clock::now();
    out.push_back(iv);
  }
  return out;
}

// Whether some product of one thread ran while one of the other thread's was running.
bool any_overlap(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  for (const Interval& x : a)
    for (const Interval& y : b)
      if (x.start < y.end && y.start < x.end) return true;
  return false;
}

}  // namespace

TEST_CASE("products on two threads run at the same time", "[cpu_threads]") {
  // Were a library lock held around each product, one thread's products would never overlap the
  // other's in time. Overlap in wall time needs no idle core, so a busy machine cannot fail this.
  for (int kind : {0, 1, 2}) {
    CAPTURE(kind);
    std::atomic<int> ready{0};
    std::vector<Interval> first, second;
    auto body = [&](std::vector<Interval>& out) {
      ready.fetch_add(1);
      auto deadline = Clock::now() + std::chrono::seconds(10);
      while (ready.load() < 2 && Clock::now() < deadline) std::this_thread::yield();
      out = timed_products(kind, 40);
    };
    std::thread t1(body, std::ref(first)), t2(body, std::ref(second));
    t1.join();
    t2.join();
    CHECK(any_overlap(first, second));
  }
}
