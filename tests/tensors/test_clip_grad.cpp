// Tests for optim/clip_grad.h: the global norm, scaling only above max_norm.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("clip_grad_norm returns the global norm and scales above max_norm", "[clip_grad]") {
  tp::Tensor a = tp::zeros({2}).requires_grad_();
  tp::Tensor b = tp::zeros({1}).requires_grad_();
  tp::Tensor none = tp::zeros({3}).requires_grad_();
  a.set_grad(tp::from_vector({3.0f, 0.0f}, {2}));
  b.set_grad(tp::from_vector({4.0f}, {1}));
  float norm = tp::optim::clip_grad_norm({a, b, none}, 1.0f);
  CHECK(norm == Approx(5.0f));
  float coef = 1.0f / (5.0f + 1e-6f);
  CHECK(a.grad().to_vector()[0] == Approx(3.0f * coef));
  CHECK(b.grad().to_vector()[0] == Approx(4.0f * coef));
  CHECK_FALSE(none.grad().defined());
  // Below the limit: untouched, and the norm is still reported.
  float again = tp::optim::clip_grad_norm({a, b}, 10.0f);
  CHECK(again == Approx(1.0f).epsilon(1e-5));
  CHECK(b.grad().to_vector()[0] == Approx(4.0f * coef));
  CHECK_THROWS(tp::optim::clip_grad_norm({a}, -1.0f));
}

TEST_CASE("clip_grad_norm handles bfloat16 gradients in place", "[clip_grad]") {
  tp::Tensor a = tp::zeros({2}).to(tp::DType::BFloat16).requires_grad_();
  tp::Tensor b = tp::zeros({1}).requires_grad_();
  a.set_grad(tp::from_vector({3.0f, 0.0f}, {2}).to(tp::DType::BFloat16));
  b.set_grad(tp::from_vector({4.0f}, {1}));
  tp::Tensor grad_a = a.grad();
  CHECK(tp::optim::clip_grad_norm({a, b}, 1.0f) == Approx(5.0f));
  CHECK(a.grad().is_same(grad_a));
  CHECK(a.grad().dtype() == tp::DType::BFloat16);
  CHECK(a.grad().to_vector()[0] == Approx(0.6f).epsilon(4e-3));
  CHECK(b.grad().to_vector()[0] == Approx(0.8f).epsilon(1e-5));
}
