// Tests for nn/embedding.h: lookup shape and rows, gradient into the table.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

TEST_CASE("Embedding looks up rows and sends gradients to them", "[nn_embedding]") {
  nn::Embedding emb(5, 3);
  CHECK(emb->weight.shape() == tp::Shape{5, 3});
  tp::Tensor ids = tp::from_vector({4, 0, 4, 2}, {2, 2});
  tp::Tensor out = emb(ids);
  CHECK(out.shape() == tp::Shape{2, 2, 3});
  std::vector<float> w = emb->weight.to_vector(), o = out.to_vector();
  for (int j = 0; j < 3; ++j) {
    CHECK(o[j] == w[4 * 3 + j]);
    CHECK(o[9 + j] == w[2 * 3 + j]);
  }
  tp::sum(out).backward();
  std::vector<float> g = emb->weight.grad().to_vector();
  CHECK(g[4 * 3] == 2.0f);  // id 4 used twice
  CHECK(g[1 * 3] == 0.0f);
  CHECK_THROWS(emb(tp::from_vector({5}, {1})));
}
