// Tests for compute_activity.h: the counts of computing threads and of ranks inside a step
// follow their scopes, across threads and nested.
#include <catch2/catch.hpp>
#include <thread>

#include "tensorplay/base/compute_activity.h"

namespace tp = tensorplay;

TEST_CASE("compute scopes count the threads computing now", "[compute_activity]") {
  const int before = tp::threads_computing();
  {
    tp::ComputeScope outer;
    CHECK(tp::threads_computing() == before + 1);
    {
      tp::ComputeScope inner;  // nested: counts once more, and goes with its scope
      CHECK(tp::threads_computing() == before + 2);
    }
    CHECK(tp::threads_computing() == before + 1);
    int seen_in_thread = -1;
    std::thread other([&] {
      tp::ComputeScope scope;
      seen_in_thread = tp::threads_computing();
    });
    other.join();
    CHECK(seen_in_thread == before + 2);
  }
  CHECK(tp::threads_computing() == before);
}

TEST_CASE("step scopes count the ranks inside a step", "[compute_activity]") {
  const int before = tp::ranks_in_step();
  {
    tp::StepScope one, two;  // two ranks of this process in their steps
    CHECK(tp::ranks_in_step() == before + 2);
  }
  CHECK(tp::ranks_in_step() == before);
}
