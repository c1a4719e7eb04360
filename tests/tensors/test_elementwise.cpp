// Tests for ops/elementwise.h beyond the op table: broadcasting errors and rank-8 broadcasting.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("elementwise ops reject shapes that do not broadcast", "[elementwise]") {
  CHECK_THROWS_WITH(tp::add(tp::ones({2, 3}), tp::ones({4})), Catch::Contains("add"));
  CHECK_THROWS_WITH(tp::mul(tp::ones({2, 3}), tp::ones({3, 3})), Catch::Contains("[2, 3]"));
}

TEST_CASE("rank-8 broadcasting on both sides matches an index loop", "[elementwise]") {
  // The shapes of the CUDA broadcast test, so its CPU reference is known to be valid.
  const tp::Shape as{2, 1, 3, 1, 2, 1, 2, 2}, bs{3, 2, 2, 3, 1, 2};
  tp::Generator g(8);
  tp::Tensor a = tp::randn(as, {}, &g), b = tp::randn(bs, {}, &g);
  tp::Tensor c = a - b;
  REQUIRE(c.shape() == tp::Shape{2, 1, 3, 2, 2, 3, 2, 2});
  std::vector<float> av = a.to_vector(), bv = b.to_vector(), cv = c.to_vector();
  const tp::Shape cs = c.shape();
  for (int64_t i = 0; i < c.numel(); ++i) {
    int64_t rest = i, ao = 0, bo = 0, a_stride = 1, b_stride = 1;
    for (int d = 7; d >= 0; --d) {
      int64_t idx = rest % cs[d];
      rest /= cs[d];
      if (as[d] != 1) ao += idx * a_stride;
      a_stride *= as[d];
      if (d >= 2) {
        if (bs[d - 2] != 1) bo += idx * b_stride;
        b_stride *= bs[d - 2];
      }
    }
    REQUIRE(cv[i] == av[ao] - bv[bo]);
  }
}
