// Tests for nn/mlp.h: names, shapes, the computation itself.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

TEST_CASE("MLP expands to 4x width through GELU and projects back", "[mlp]") {
  nn::MLP mlp(4);
  std::vector<std::string> names;
  for (auto& [n, p] : mlp->named_parameters()) names.push_back(n + tp::to_string(p.shape()));
  CHECK(names == std::vector<std::string>{"c_fc.weight[16, 4]", "c_fc.bias[16]",
                                          "c_proj.weight[4, 16]", "c_proj.bias[4]"});
  tp::Generator g(3);
  tp::Tensor x = tp::randn({2, 3, 4}, {}, &g);
  tp::Tensor expected = tp::linear(tp::gelu(tp::linear(x, mlp->c_fc->weight, mlp->c_fc->bias)),
                                   mlp->c_proj->weight, mlp->c_proj->bias);
  CHECK(mlp(x).to_vector() == expected.to_vector());
}
