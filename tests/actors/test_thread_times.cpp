// Tests for thread_times.h: schedstat lines, this thread's and the process's figures, their
// change over a stretch of time and their sums by thread name.
#include <pthread.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "tensorplay/observe/thread_times.h"

namespace pp = tensorplay::pipelining;

TEST_CASE("schedstat lines parse into CPU and runnable time", "[thread_times]") {
  pp::ThreadTimes t;
  REQUIRE(pp::parse_schedstat("123456 789 12\n", t));
  CHECK(t.cpu_ns == 123456);
  CHECK(t.runnable_ns == 789);
  CHECK(t.slices == 12);
  CHECK_FALSE(pp::parse_schedstat("", t));
  CHECK_FALSE(pp::parse_schedstat("12 x", t));
}

TEST_CASE("a busy thread's CPU time shows in the process's figures", "[thread_times]") {
  const auto before = pp::process_thread_times();
  if (before.empty()) {  // not Linux, or a kernel without scheduler statistics
    WARN("this kernel keeps no scheduler statistics: nothing to check");
    return;
  }
  std::thread busy([] {
    pthread_setname_np(pthread_self(), "test-busy");
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
    volatile unsigned spin = 0;
    while (std::chrono::steady_clock::now() < end) spin = spin + 1;
  });
  busy.join();  // an exited thread leaves the list: look at the calling thread instead
  const pp::ThreadTimes self_before = pp::this_thread_times();
  REQUIRE(self_before.tid != 0);
  // Spin until 20 ms of CPU time show (on a loaded machine that takes longer than 20 ms).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  pp::ThreadTimes self_after = self_before;
  volatile unsigned spin = 0;
  while (self_after.cpu_ns - self_before.cpu_ns < 20'000'000 &&
         std::chrono::steady_clock::now() < give_up) {
    for (int i = 0; i < 100000; ++i) spin = spin + 1;
    self_after = pp::this_thread_times();
  }
  CHECK(self_after.tid == self_before.tid);
  REQUIRE(self_after.cpu_ns - self_before.cpu_ns >= 20'000'000);  // else: no CPU time counted
  CHECK(self_after.slices >= self_before.slices);

  const auto since = pp::thread_times_since(before, pp::process_thread_times());
  REQUIRE_FALSE(since.empty());
  CHECK(since.front().tid == self_before.tid);  // the busiest thread first
  CHECK(since.front().cpu_ns >= 20'000'000);
}

TEST_CASE("thread figures sum by name, busiest first, and print as JSON", "[thread_times]") {
  const std::vector<pp::ThreadTimes> threads = {{1, "main", 5'000'000, 1'000'000, 3},
                                                {2, "tp-ucx", 1'000'000, 0, 10},
                                                {3, "tp-stage", 4'000'000, 2'000'000, 5},
                                                {4, "tp-stage", 3'000'000, 500'000, 5}};
  const auto sums = pp::sum_by_name(threads);
  REQUIRE(sums.size() == 3);
  CHECK(sums[0].name == "tp-stage");
  CHECK(sums[0].cpu_ns == 7'000'000);
  CHECK(sums[0].runnable_ns == 2'500'000);
  CHECK(sums[0].tid == 3);
  CHECK(sums[1].name == "main");
  const std::string json = pp::thread_times_json(threads);
  CHECK_THAT(json, Catch::StartsWith("[{\"name\":\"tp-stage\",\"threads\":2,\"cpu_ms\":7,"));
  CHECK_THAT(json, Catch::Contains("{\"name\":\"tp-ucx\",\"threads\":1,\"cpu_ms\":1,"));
  const auto since = pp::thread_times_since({{3, "tp-stage", 1'000'000, 0, 1}}, threads);
  CHECK(since.front().name == "main");  // tid 3 counts from 1 ms: 3 ms
}
