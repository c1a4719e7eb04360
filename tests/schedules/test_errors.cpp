#include <catch2/catch.hpp>

#include "tensorplay/schedules/errors.h"

using namespace tensorplay::schedules;

TEST_CASE("ScheduleError is a runtime_error carrying its message", "[errors]") {
  try {
    throw ScheduleError("order deadlocks at step 3");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "order deadlocks at step 3");
  }
}
