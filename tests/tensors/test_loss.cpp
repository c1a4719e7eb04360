// Tests for ops/loss.h beyond the op table: ignored targets, bad targets and shapes.
#include <catch2/catch.hpp>
#include <cmath>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("cross_entropy with every target ignored is 0 with zero gradients", "[loss]") {
  tp::Tensor logits = tp::randn({3, 4}).requires_grad_();
  tp::Tensor targets = tp::full({3}, -100.0f);
  tp::Tensor loss = tp::cross_entropy(logits, targets);
  CHECK(loss.item() == 0.0f);
  loss.backward();
  CHECK(logits.grad().to_vector() == std::vector<float>(12, 0.0f));
}

TEST_CASE("cross_entropy of uniform logits is log(C)", "[loss]") {
  tp::Tensor loss = tp::cross_entropy(tp::zeros({2, 8}), tp::from_vector({3, 5}, {2}));
  CHECK(loss.item() == Approx(std::log(8.0f)));
  CHECK(tp::cross_entropy(tp::zeros({2, 8}), tp::from_vector({7, 7}, {2}), 7).item() == 0.0f);
}

TEST_CASE("loss errors name the bad target or shape", "[loss]") {
  tp::Tensor logits = tp::zeros({2, 3});
  CHECK_THROWS_WITH(tp::cross_entropy(logits, tp::from_vector({0, 3}, {2})),
                    Catch::Contains("target 3") && Catch::Contains("[0, 3)"));
  CHECK_THROWS_WITH(tp::cross_entropy(logits, tp::from_vector({0, -1}, {2})),
                    Catch::Contains("row 1"));
  CHECK_THROWS_WITH(tp::cross_entropy(logits, tp::zeros({3})),
                    Catch::Contains("logits [N, C] and targets [N]"));
  CHECK_THROWS_WITH(tp::cross_entropy(tp::zeros({6}), tp::zeros({6})), Catch::Contains("[N, C]"));
  CHECK_THROWS_WITH(tp::mse_loss(tp::zeros({2}), tp::zeros({3})),
                    Catch::Contains("differs from target shape"));
}

TEST_CASE("cross_entropy targets must be float32, logits may be bfloat16", "[loss]") {
  tp::Tensor logits = tp::zeros({2, 300}).to(tp::DType::BFloat16);
  CHECK_THROWS_WITH(
      tp::cross_entropy(logits, tp::from_vector({257, 1}, {2}).to(tp::DType::BFloat16)),
      Catch::Contains("cross_entropy (targets)"));
  tp::Tensor loss = tp::cross_entropy(logits, tp::from_vector({257, 1}, {2}));
  CHECK(loss.dtype() == tp::DType::BFloat16);
  CHECK(loss.item() == Approx(std::log(300.0)).epsilon(4e-3));
}
