// Tests for ops/shape_ops.h beyond the op table: permute/transpose results and errors.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("transpose of a matrix swaps rows and columns", "[shape_ops]") {
  tp::Tensor x = tp::arange(6).reshape({2, 3});
  tp::Tensor t = tp::transpose(x, 0, 1);
  CHECK(t.shape() == tp::Shape{3, 2});
  CHECK(t.to_vector() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(tp::permute(t, {1, 0}).to_vector() == x.to_vector());
}

TEST_CASE("shape op errors name the problem", "[shape_ops]") {
  tp::Tensor x = tp::ones({2, 3, 4});
  CHECK_THROWS_WITH(tp::permute(x, {0, 1}), Catch::Contains("2 dimensions given"));
  CHECK_THROWS_WITH(tp::permute(x, {0, 1, 1}), Catch::Contains("appears twice"));
  CHECK_THROWS_WITH(tp::permute(x, {0, 1, 3}), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(tp::transpose(x, 0, 5), Catch::Contains("dimension 5 is out of range"));
  CHECK_THROWS_WITH(tp::narrow(x, 1, 2, 2), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(tp::cat({x, tp::ones({2, 2, 5})}, 1), Catch::Contains("incompatible"));
}

TEST_CASE("cat of zero-dimensional tensors is an error, not a crash", "[shape_ops]") {
  CHECK_THROWS_WITH(tp::cat({tp::scalar_tensor(1), tp::scalar_tensor(2)}, 0),
                    Catch::Contains("zero-dimensional") && Catch::Contains("reshape"));
}
