// Tests for ops/dropout.h: seeded masks, scaling, identity cases, bad probabilities.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("dropout with the same generator state gives the same mask", "[dropout]") {
  tp::Tensor x = tp::ones({1000});
  tp::Generator g1(5), g2(5), g3(6);
  auto a = tp::dropout(x, 0.25f, true, &g1).to_vector();
  auto b = tp::dropout(x, 0.25f, true, &g2).to_vector();
  auto c = tp::dropout(x, 0.25f, true, &g3).to_vector();
  CHECK(a == b);
  CHECK(a != c);
  int zeros = 0;
  for (float v : a) {
    CHECK((v == 0.0f || v == Approx(1.0f / 0.75f)));
    zeros += v == 0.0f;
  }
  CHECK(zeros > 180);  // about 250 expected
  CHECK(zeros < 320);
}

TEST_CASE("dropout is the identity in eval mode or with p = 0, zeros with p = 1", "[dropout]") {
  tp::Tensor x = tp::randn({4, 4});
  CHECK(tp::dropout(x, 0.5f, false).is_same(x));
  CHECK(tp::dropout(x, 0.0f, true).is_same(x));
  CHECK(tp::dropout(x, 1.0f, true).to_vector() == std::vector<float>(16, 0.0f));
}

TEST_CASE("dropout gradient uses the forward mask", "[dropout]") {
  tp::Tensor x = tp::ones({64}).requires_grad_();
  tp::Generator g(1);
  tp::Tensor y = tp::dropout(x, 0.5f, true, &g);
  tp::sum(y).backward();
  CHECK(x.grad().to_vector() == y.to_vector());  // d(sum(x * mask))/dx = mask, and x = 1
}

TEST_CASE("dropout rejects probabilities outside [0, 1]", "[dropout]") {
  CHECK_THROWS_WITH(tp::dropout(tp::ones({2}), 1.5f, true), Catch::Contains("outside [0, 1]"));
  CHECK_THROWS_WITH(tp::dropout(tp::ones({2}), -0.1f, true), Catch::Contains("probability"));
}
