// Tests for nn/attention.h: names and shapes, causality (no influence from later positions).
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

TEST_CASE("CausalSelfAttention has GPT-2's projections and keeps the shape", "[nn_attention]") {
  nn::CausalSelfAttention attn(8, 2);
  std::vector<std::string> names;
  for (auto& [n, p] : attn->named_parameters()) names.push_back(n + tp::to_string(p.shape()));
  CHECK(names == std::vector<std::string>{"c_attn.weight[24, 8]", "c_attn.bias[24]",
                                          "c_proj.weight[8, 8]", "c_proj.bias[8]"});
  tp::Generator g(1);
  tp::Tensor x = tp::randn({2, 5, 8}, {}, &g);
  tp::Tensor y = attn(x);
  CHECK(y.shape() == tp::Shape{2, 5, 8});
  CHECK_THROWS_WITH(attn(tp::ones({2, 5, 7})), Catch::Contains("[B, T, 8]"));
  CHECK_THROWS_WITH(nn::CausalSelfAttention(8, 3), Catch::Contains("divide"));
}

TEST_CASE("CausalSelfAttention output at t depends only on inputs up to t", "[nn_attention]") {
  nn::CausalSelfAttention attn(8, 2);
  tp::Generator g(2);
  std::vector<float> a = tp::randn({1, 4, 8}, {}, &g).to_vector();
  std::vector<float> b = a;
  for (int j = 0; j < 8; ++j) b[3 * 8 + j] += 1.0f;  // change the last position only
  std::vector<float> ya = attn(tp::from_vector(a, {1, 4, 8})).to_vector();
  std::vector<float> yb = attn(tp::from_vector(b, {1, 4, 8})).to_vector();
  for (int i = 0; i < 3 * 8; ++i) CHECK(ya[i] == yb[i]);
  bool last_changed = false;
  for (int i = 3 * 8; i < 4 * 8; ++i) last_changed = last_changed || ya[i] != yb[i];
  CHECK(last_changed);
}
