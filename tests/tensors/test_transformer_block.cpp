// Tests for nn/transformer_block.h: child names and order, the pre-norm residual computation.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

TEST_CASE("TransformerBlock is pre-norm with two residuals", "[transformer_block]") {
  nn::TransformerBlock block(8, 2);
  std::vector<std::string> children;
  for (auto& [n, m] : block->named_children()) children.push_back(n);
  CHECK(children == std::vector<std::string>{"ln_1", "attn", "ln_2", "mlp"});
  CHECK(block->named_parameters().size() == 2 + 4 + 2 + 4);
  tp::Generator g(4);
  tp::Tensor x = tp::randn({2, 3, 8}, {}, &g);
  tp::Tensor h = x + block->attn(block->ln_1(x));
  tp::Tensor expected = h + block->mlp(block->ln_2(h));
  CHECK(block(x).to_vector() == expected.to_vector());
}
