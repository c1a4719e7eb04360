// The CUDA device guard's logic with a stand-in for the runtime (no GPU needed): a thread without
// a current device never gets device 0 made current behind its back.
#include <catch2/catch.hpp>
#include <vector>

#include "tensorplay/cuda/device_guard_logic.h"

namespace {

using tensorplay::cuda::BasicDeviceGuard;
using tensorplay::cuda::CurrentDeviceOps;

// The stand-in thread state: the current device (-1: none) and every device made current.
thread_local int fake_current = -1;
thread_local std::vector<int> made_current;

int fake_get() { return fake_current; }
void fake_set(int device) {
  fake_current = device;
  made_current.push_back(device);
}
const CurrentDeviceOps kFake{&fake_get, &fake_set};

void reset(int current) {
  fake_current = current;
  made_current.clear();
}

}  // namespace

TEST_CASE("device guard: a thread with no current device keeps the guarded one, never device 0") {
  reset(-1);
  {
    BasicDeviceGuard guard(kFake, 1);
    CHECK(fake_current == 1);
    CHECK(guard.previous() == -1);
  }
  CHECK(fake_current == 1);
  CHECK(made_current == std::vector<int>{1});
}

TEST_CASE("device guard: the previous device comes back") {
  reset(2);
  {
    BasicDeviceGuard guard(kFake, 1);
    CHECK(fake_current == 1);
  }
  CHECK(fake_current == 2);
  CHECK(made_current == std::vector<int>{1, 2});
}

TEST_CASE("device guard: the current device is not set again") {
  reset(3);
  { BasicDeviceGuard guard(kFake, 3); }
  CHECK(made_current.empty());
  CHECK(fake_current == 3);
}

TEST_CASE("device guard: nested guards unwind in order") {
  reset(-1);
  {
    BasicDeviceGuard outer(kFake, 1);
    {
      BasicDeviceGuard inner(kFake, 2);
      CHECK(fake_current == 2);
    }
    CHECK(fake_current == 1);
  }
  CHECK(fake_current == 1);
  CHECK(made_current == std::vector<int>{1, 2, 1});
}

TEST_CASE("device guard: a failing restore does not escape the destructor") {
  reset(0);
  static bool fail_next = false;
  const CurrentDeviceOps throwing{&fake_get, [](int device) {
                                    if (fail_next) throw 1;
                                    fake_set(device);
                                  }};
  {
    BasicDeviceGuard guard(throwing, 1);
    fail_next = true;
  }
  fail_next = false;
  CHECK(fake_current == 1);
}

TEST_CASE("device guard: a device switched inside the guard is put back") {
  reset(1);
  {
    BasicDeviceGuard guard(kFake, 1);
    fake_set(2);  // code inside the guard changed the device and left it
  }
  CHECK(fake_current == 1);
}
