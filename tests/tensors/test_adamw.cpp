// Tests for optim/adamw.h: two steps against values computed by hand from PyTorch's formulas,
// weight decay, skipped parameters, state round trip.
#include <catch2/catch.hpp>
#include <cmath>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace optim = tensorplay::optim;

namespace {
// One AdamW step in double for one element (the reference).
struct Reference {
  double p, m = 0, v = 0;
  int t = 0;
  void step(double g, double lr, double b1, double b2, double eps, double wd) {
    ++t;
    p *= 1 - lr * wd;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    double mhat = m / (1 - std::pow(b1, t));
    double vhat = v / (1 - std::pow(b2, t));
    p -= lr * mhat / (std::sqrt(vhat) + eps);
  }
};
}  // namespace

TEST_CASE("AdamW matches the hand-computed update for two steps", "[adamw]") {
  tp::Tensor w = tp::from_vector({1.0f, -2.0f, 0.5f}, {3}).requires_grad_();
  optim::AdamWOptions o{
      .lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f};
  optim::AdamW opt({w}, o);
  std::vector<Reference> ref = {{1.0}, {-2.0}, {0.5}};
  const std::vector<std::vector<float>> grads = {{0.5f, -1.0f, 2.0f}, {-0.25f, 3.0f, 0.0f}};
  for (const auto& g : grads) {
    w.set_grad(tp::from_vector(g, {3}));
    opt.step();
    for (size_t i = 0; i < 3; ++i) ref[i].step(g[i], o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
    std::vector<float> got = w.to_vector();
    for (size_t i = 0; i < 3; ++i) CHECK(got[i] == Approx(ref[i].p).epsilon(1e-6));
  }
  CHECK(opt.step_count(0) == 2);
  // First step by hand for element 0: p = 1 * (1 - 0.01) - 0.1 * sign(g) = 0.89.
  tp::Tensor fresh = tp::from_vector({1.0f}, {1}).requires_grad_();
  optim::AdamW one({fresh}, o);
  fresh.set_grad(tp::from_vector({0.5f}, {1}));
  one.step();
  CHECK(fresh.item() == Approx(0.89).epsilon(1e-6));
}

TEST_CASE("AdamW skips parameters without gradients and validates options", "[adamw]") {
  tp::Tensor a = tp::ones({2}).requires_grad_();
  tp::Tensor b = tp::ones({2}).requires_grad_();
  optim::AdamW opt({a, b}, {.lr = 0.1f});
  a.set_grad(tp::ones({2}));
  opt.step();
  CHECK(b.to_vector() == std::vector<float>{1, 1});
  CHECK(opt.step_count(1) == 0);
  CHECK(a.to_vector()[0] < 1.0f);
  CHECK_THROWS_WITH(optim::AdamW({a}, {.beta1 = 1.0f}), Catch::Contains("betas"));
  CHECK_THROWS_WITH(optim::AdamW({a, a}), Catch::Contains("same tensor"));
}

TEST_CASE("AdamW state_dict round trip continues identically", "[adamw]") {
  tp::Generator gen(5);
  tp::Tensor w1 = tp::randn({4}, {}, &gen).requires_grad_();
  tp::Tensor w2 = w1.detach().clone().requires_grad_();
  optim::AdamW a({w1}, {.lr = 0.05f});
  std::vector<tp::Tensor> grads = {tp::randn({4}, {}, &gen), tp::randn({4}, {}, &gen),
                                   tp::randn({4}, {}, &gen)};
  w1.set_grad(grads[0]);
  a.step();
  w2.copy_(w1.detach());
  optim::AdamW b({w2}, {.lr = 1.0f});  // options come back from the state
  b.load_state_dict(a.state_dict());
  CHECK(b.options().lr == 0.05f);
  CHECK(b.step_count(0) == 1);
  for (size_t s = 1; s < grads.size(); ++s) {
    w1.set_grad(grads[s]);
    w2.set_grad(grads[s]);
    a.step();
    b.step();
  }
  CHECK(w1.to_vector() == w2.to_vector());

  tp::StateDict bad = a.state_dict();
  bad.insert_or_assign("state.0.exp_avg", tp::zeros({5}));
  CHECK_THROWS_WITH(b.load_state_dict(bad),
                    Catch::Contains("state.0.exp_avg") && Catch::Contains("[5]"));
  tp::StateDict other = a.state_dict();
  other.insert("state.3.exp_avg", tp::zeros({4}));
  CHECK_THROWS_WITH(b.load_state_dict(other), Catch::Contains("parameter 3"));
  tp::StateDict sgd_state;
  sgd_state.insert("state.0.momentum_buffer", tp::zeros({4}));
  CHECK_THROWS_WITH(b.load_state_dict(sgd_state), Catch::Contains("momentum_buffer"));
}

TEST_CASE("AdamW follows its parameters from bfloat16 back to float32", "[adamw]") {
  tp::nn::Linear layer(3, 2);
  optim::AdamW opt(layer->parameters(), {.lr = 0.01f});
  layer->to(tp::DType::BFloat16);
  tp::sum(layer(tp::ones({1, 3}).to(tp::DType::BFloat16))).backward();
  opt.step();
  CHECK(opt.state_dict().at("state.0.exp_avg").dtype() == tp::DType::BFloat16);
  opt.zero_grad();
  layer->to(tp::DType::Float32);
  tp::sum(layer(tp::ones({1, 3}))).backward();
  opt.step();
  CHECK(opt.state_dict().at("state.0.exp_avg").dtype() == tp::DType::Float32);
  CHECK(opt.step_count(0) == 2);
}

TEST_CASE("AdamW's vector update gives the scalar float formula's bits, tails included",
          "[adamw]") {
  for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{17}, int64_t{1027}}) {
    CAPTURE(n);
    tp::Generator gen(n);
    tp::Tensor w = tp::randn({n}, {}, &gen).requires_grad_(true);
    std::vector<float> p = w.to_vector(), m(n, 0.0f), v(n, 0.0f);
    const optim::AdamWOptions o{.lr = 1e-2f, .weight_decay = 0.1f};
    optim::AdamW opt({w}, o);
    for (int step = 1; step <= 2; ++step) {
      tp::Tensor g = tp::randn({n}, {}, &gen);
      w.set_grad(g);
      opt.step();
      // The scalar formula, each operation rounded to float in this order.
      const double c1 = 1.0 - std::pow(static_cast<double>(o.beta1), step);
      const double c2 = 1.0 - std::pow(static_cast<double>(o.beta2), step);
      const auto decay = static_cast<float>(1.0 - static_cast<double>(o.lr) * o.weight_decay);
      const auto w1 = static_cast<float>(1.0 - o.beta1), w2 = static_cast<float>(1.0 - o.beta2);
      const auto step_size = static_cast<float>(o.lr / c1);
      const auto c2_sqrt = static_cast<float>(std::sqrt(c2));
      const std::vector<float> gv = g.to_vector();
      for (int64_t k = 0; k < n; ++k) {
        volatile float pk = p[k] * decay;
        volatile float mk = m[k] + w1 * (gv[k] - m[k]);
        volatile float vk = v[k] * o.beta2 + w2 * (gv[k] * gv[k]);
        volatile float denom = std::sqrt(vk) / c2_sqrt + o.eps;
        p[k] = pk - step_size * (mk / denom);
        m[k] = mk;
        v[k] = vk;
      }
      REQUIRE(w.to_vector() == p);
    }
  }
}
