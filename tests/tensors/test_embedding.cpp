// Tests for ops/embedding.h beyond the op table: id checks and gradients only to the weight.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("embedding gathers rows and accumulates repeated ids", "[embedding]") {
  tp::Tensor w = tp::arange(6).reshape({3, 2}).detach().requires_grad_();
  tp::Tensor ids = tp::from_vector({2, 0, 2}, {3});
  tp::Tensor y = tp::embedding(ids, w);
  CHECK(y.shape() == tp::Shape{3, 2});
  CHECK(y.to_vector() == std::vector<float>{4, 5, 0, 1, 4, 5});
  tp::sum(y).backward();
  CHECK(w.grad().to_vector() == std::vector<float>{1, 1, 0, 0, 2, 2});
}

TEST_CASE("embedding rejects ids outside the vocabulary, naming the id and size", "[embedding]") {
  tp::Tensor w = tp::zeros({5, 3});
  CHECK_THROWS_WITH(tp::embedding(tp::from_vector({1, 7}, {2}), w),
                    Catch::Contains("id 7") && Catch::Contains("vocabulary of size 5"));
  CHECK_THROWS_WITH(tp::embedding(tp::from_vector({-1}, {1}), w), Catch::Contains("id -1"));
  CHECK_THROWS_WITH(tp::embedding(tp::from_vector({1.5f}, {1}), w), Catch::Contains("integers"));
  CHECK_THROWS_WITH(tp::embedding(tp::from_vector({0}, {1}), tp::zeros({5})),
                    Catch::Contains("[vocab, dim]"));
}

TEST_CASE("embedding ids must be float32: bfloat16 cannot count past 256", "[embedding]") {
  tp::Tensor weight = tp::ones({300, 2}).to(tp::DType::BFloat16);
  tp::Tensor ids = tp::from_vector({257}, {1}).to(tp::DType::BFloat16);  // rounds to 256
  CHECK_THROWS_WITH(tp::embedding(ids, weight),
                    Catch::Contains("embedding (indices)") && Catch::Contains("float32"));
  CHECK(tp::embedding(tp::from_vector({257}, {1}), weight).dtype() == tp::DType::BFloat16);
}
