// Tests for ops/reduction.h beyond the op table: keepdim shapes and bad dimensions.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("sum and mean keep or drop the reduced dimension", "[reduction]") {
  tp::Tensor x = tp::ones({2, 3, 4});
  CHECK(tp::sum(x, 1, true).shape() == tp::Shape{2, 1, 4});
  CHECK(tp::sum(x, 1).shape() == tp::Shape{2, 4});
  CHECK(tp::mean(x, -1, true).shape() == tp::Shape{2, 3, 1});
  CHECK(tp::sum(x).shape() == tp::Shape{});
  CHECK(tp::sum(x, 1, true).to_vector() == std::vector<float>(8, 3.0f));
  CHECK_THROWS_WITH(tp::sum(x, 3), Catch::Contains("out of range"));
}
