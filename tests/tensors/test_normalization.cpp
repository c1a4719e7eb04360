// Tests for ops/normalization.h beyond the op table: statistics of the output, bad shapes.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("layer_norm rows have zero mean and unit variance", "[layer_norm]") {
  tp::Tensor x = tp::randn({4, 64}) * 3.0f + 2.0f;
  tp::Tensor y = tp::layer_norm(x, 64);
  std::vector<float> m = tp::mean(y, 1).to_vector();
  std::vector<float> v = tp::mean(tp::square(y), 1).to_vector();
  for (int r = 0; r < 4; ++r) {
    CHECK(m[r] == Approx(0.0f).margin(1e-5));
    CHECK(v[r] == Approx(1.0f).epsilon(1e-3));
  }
}

TEST_CASE("layer_norm computes only the requested parameter gradients", "[layer_norm]") {
  tp::Tensor x = tp::randn({3, 4}).requires_grad_();
  tp::Tensor w = tp::ones({4});  // frozen
  tp::Tensor b = tp::zeros({4}).requires_grad_();
  tp::sum(tp::layer_norm(x, 4, w, b)).backward();
  CHECK(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
  CHECK(b.grad().to_vector() == std::vector<float>(4, 3.0f));
}

TEST_CASE("layer_norm shape errors say what was expected", "[layer_norm]") {
  tp::Tensor x = tp::ones({2, 5});
  CHECK_THROWS_WITH(tp::layer_norm(x, 4), Catch::Contains("does not end in the normalized size 4"));
  CHECK_THROWS_WITH(tp::layer_norm(x, 5, tp::ones({4})),
                    Catch::Contains("weight of shape [4] does not match normalized size 5"));
  CHECK_THROWS_WITH(tp::layer_norm(x, 5, tp::ones({5}), tp::ones({5, 1})),
                    Catch::Contains("bias of shape [5, 1]"));
}
