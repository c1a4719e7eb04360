// Tests for ops/linear_algebra.h beyond the op table: shape errors.
#include <catch2/catch.hpp>

#include "tensors/tensors.h"

namespace tp = tensorplay;

TEST_CASE("matmul, bmm and linear shape errors show both shapes", "[linear_algebra]") {
  CHECK_THROWS_WITH(tp::matmul(tp::ones({2, 3}), tp::ones({4, 5})),
                    Catch::Contains("inner dimensions differ: [2, 3] x [4, 5]"));
  CHECK_THROWS_WITH(tp::matmul(tp::ones({2, 2, 3}), tp::ones({3, 3, 4})),
                    Catch::Contains("batch dimensions differ"));
  CHECK_THROWS_WITH(tp::bmm(tp::ones({2, 3}), tp::ones({3, 4})), Catch::Contains("bmm: expected"));
  CHECK_THROWS_WITH(tp::linear(tp::ones({2, 3}), tp::ones({4, 5})),
                    Catch::Contains("does not match weight of shape [4, 5]"));
  CHECK_THROWS_WITH(tp::linear(tp::ones({2, 5}), tp::ones({4, 5}), tp::ones({3})),
                    Catch::Contains("bias of shape [3]"));
}
