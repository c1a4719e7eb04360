// Tests for nn/dropout.h: training vs eval, scaling, seeded generator.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

TEST_CASE("Dropout zeroes and rescales in training, is the identity in eval", "[nn_dropout]") {
  nn::Dropout drop(0.5f);
  tp::Generator gen(7);
  drop->set_generator(&gen);
  tp::Tensor x = tp::ones({1000});
  std::vector<float> y = drop(x).to_vector();
  int zeros = 0;
  for (float v : y) {
    CHECK((v == 0.0f || v == 2.0f));
    zeros += v == 0.0f;
  }
  CHECK(zeros > 400);
  CHECK(zeros < 600);
  gen.manual_seed(7);
  CHECK(drop(x).to_vector() == y);  // same generator state, same mask
  drop->eval();
  CHECK(drop(x).to_vector() == x.to_vector());
  CHECK(nn::Dropout(0.0f)(x).to_vector() == x.to_vector());
  CHECK_THROWS_WITH(nn::Dropout(1.5f), Catch::Contains("1.5"));
}
