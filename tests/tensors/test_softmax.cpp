// Tests for ops/softmax.h beyond the op table: stability with large inputs, bad dimensions.
#include <catch2/catch.hpp>
#include <cmath>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("softmax and log_softmax stay finite for large logits", "[softmax]") {
  tp::Tensor x = tp::from_vector({1000, 1001, -1000, 0}, {1, 4});
  std::vector<float> p = tp::softmax(x, -1).to_vector();
  std::vector<float> lp = tp::log_softmax(x, 1).to_vector();
  for (size_t i = 0; i < 4; ++i) {
    CHECK(std::isfinite(p[i]));
    CHECK(std::isfinite(lp[i]));
  }
  CHECK(p[1] == Approx(1.0 / (1.0 + std::exp(-1.0))).epsilon(1e-6));
  CHECK(lp[0] == Approx(-std::log1p(std::exp(1.0))).epsilon(1e-4));  // float spacing at 1000
}

TEST_CASE("softmax rows sum to one along the chosen dimension", "[softmax]") {
  tp::Tensor x = tp::randn({3, 4, 5});
  std::vector<float> s = tp::sum(tp::softmax(x, 1), 1).to_vector();
  for (float v : s) CHECK(v == Approx(1.0f).epsilon(1e-6));
}

TEST_CASE("softmax on a bad dimension names it", "[softmax]") {
  CHECK_THROWS_WITH(tp::softmax(tp::ones({2, 3}), 2),
                    Catch::Contains("dimension 2 is out of range"));
  CHECK_THROWS_WITH(tp::log_softmax(tp::ones({2, 3}), -3), Catch::Contains("log_softmax"));
}
