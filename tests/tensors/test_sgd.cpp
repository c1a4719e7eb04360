// Tests for optim/sgd.h: PyTorch's SGD update with momentum, dampening, Nesterov, weight decay.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace optim = tensorplay::optim;

TEST_CASE("SGD with momentum and weight decay follows PyTorch's formulas", "[sgd]") {
  tp::Tensor w = tp::from_vector({1.0f, 2.0f}, {2}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1f, .momentum = 0.9f, .dampening = 0.5f, .weight_decay = 0.1f});
  // Step 1: d = g + 0.1 p = [1.1, -0.8]; b = d; p -= 0.1 b.
  w.set_grad(tp::from_vector({1.0f, -1.0f}, {2}));
  opt.step();
  std::vector<double> p = {1.0 - 0.1 * 1.1, 2.0 - 0.1 * -0.8};
  std::vector<double> b = {1.1, -0.8};
  CHECK(w.to_vector()[0] == Approx(p[0]));
  CHECK(w.to_vector()[1] == Approx(p[1]));
  // Step 2: d = g + 0.1 p; b = 0.9 b + 0.5 d; p -= 0.1 b.
  w.set_grad(tp::from_vector({0.5f, 0.5f}, {2}));
  opt.step();
  for (int i = 0; i < 2; ++i) {
    double d = 0.5 + 0.1 * p[i];
    b[i] = 0.9 * b[i] + 0.5 * d;
    p[i] -= 0.1 * b[i];
    CHECK(w.to_vector()[i] == Approx(p[i]).epsilon(1e-6));
  }
}

TEST_CASE("SGD Nesterov and state round trip", "[sgd]") {
  tp::Tensor w = tp::from_vector({1.0f}, {1}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.5f, .momentum = 0.5f, .nesterov = true});
  w.set_grad(tp::from_vector({2.0f}, {1}));
  opt.step();  // b = 2; d = 2 + 0.5 * 2 = 3; p = 1 - 1.5
  CHECK(w.item() == Approx(-0.5));
  tp::Tensor v = w.detach().clone().requires_grad_();
  optim::SGD copy({v}, {.lr = 0.01f});
  copy.load_state_dict(opt.state_dict());
  CHECK(copy.options().nesterov);
  w.set_grad(tp::from_vector({1.0f}, {1}));
  v.set_grad(tp::from_vector({1.0f}, {1}));
  opt.step();
  copy.step();
  CHECK(w.item() == v.item());
  CHECK_THROWS(optim::SGD({w}, {.nesterov = true}));
}
