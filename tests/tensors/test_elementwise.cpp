// Tests for ops/elementwise.h beyond the op table: broadcasting errors.
#include <catch2/catch.hpp>

#include "tensors/tensors.h"

namespace tp = tensorplay;

TEST_CASE("elementwise ops reject shapes that do not broadcast", "[elementwise]") {
  CHECK_THROWS_WITH(tp::add(tp::ones({2, 3}), tp::ones({4})), Catch::Contains("add"));
  CHECK_THROWS_WITH(tp::mul(tp::ones({2, 3}), tp::ones({3, 3})), Catch::Contains("[2, 3]"));
}
