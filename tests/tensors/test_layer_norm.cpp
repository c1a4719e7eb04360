// Tests for nn/layer_norm.h: parameters, normalised output, bad sizes.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

TEST_CASE("LayerNorm normalises the last dimension with weight and bias", "[layer_norm]") {
  nn::LayerNorm ln(4);
  std::vector<std::string> names;
  for (auto& [n, p] : ln->named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"weight", "bias"});
  CHECK(ln->weight.to_vector() == std::vector<float>(4, 1.0f));
  tp::Tensor x = tp::from_vector({1, 2, 3, 4, 10, 10, 10, 14}, {2, 4});
  std::vector<float> y = ln(x).to_vector();
  double s = 0, sq = 0;
  for (int i = 0; i < 4; ++i) s += y[i], sq += y[i] * y[i];
  CHECK(s == Approx(0.0).margin(1e-5));
  CHECK(sq / 4 == Approx(1.0).epsilon(1e-4));
  ln->bias.detach().fill_(2.0f);
  CHECK(ln(x).to_vector()[4] == Approx(y[4] + 2.0f));
  CHECK_THROWS(ln(tp::ones({2, 3})));
  CHECK_THROWS(nn::LayerNorm(0));
}
