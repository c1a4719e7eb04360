// Tests for nn/swiglu.h: a case worked by hand, random weights against the formula in double,
// gradients against finite differences, bfloat16, and bad sizes.
#include <catch2/catch.hpp>
#include <cmath>

#include "tensorplay/nn/swiglu.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

namespace {

// down (silu(gate x) * (up x)) for rows of x [rows, w], weights [out, in] row-major, in double.
std::vector<double> swiglu_reference(const std::vector<float>& x, const std::vector<float>& gate,
                                     const std::vector<float>& up, const std::vector<float>& down,
                                     size_t w, size_t hidden) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / w; ++r) {
    std::vector<double> a(hidden);
    for (size_t j = 0; j < hidden; ++j) {
      double g = 0, u = 0;
      for (size_t i = 0; i < w; ++i) {
        g += double(gate[j * w + i]) * x[r * w + i];
        u += double(up[j * w + i]) * x[r * w + i];
      }
      a[j] = g / (1.0 + std::exp(-g)) * u;
    }
    for (size_t i = 0; i < w; ++i) {
      double s = 0;
      for (size_t j = 0; j < hidden; ++j) s += double(down[i * hidden + j]) * a[j];
      y[r * w + i] = s;
    }
  }
  return y;
}

void set(tp::Tensor& p, const std::vector<float>& values) {
  tp::NoGradGuard no_grad;
  p.copy_(tp::from_vector(values, p.shape()));
}

}  // namespace

TEST_CASE("SwiGLU computes down(silu(gate x) * up x): a case by hand", "[swiglu]") {
  nn::SwiGLU mlp(2, 2);
  std::vector<std::string> names;
  for (auto& [n, p] : mlp->named_parameters()) names.push_back(n);
  CHECK(names ==
        std::vector<std::string>{"gate_proj.weight", "up_proj.weight", "down_proj.weight"});
  set(mlp->gate_proj->weight, {1, 0, 0, 1});  // identity
  set(mlp->up_proj->weight, {2, 0, 0, 1});    // doubles the first channel
  set(mlp->down_proj->weight, {0, 1, 1, 0});  // swaps the channels
  // x = (1, -2): gate (1, -2), silu = (1 / (1 + e^-1), -2 / (1 + e^2)) = (0.7310586, -0.2384058);
  // times up (2, -2): (1.4621172, 0.4768116); swapped: (0.4768116, 1.4621172).
  std::vector<float> y = mlp(tp::from_vector({1.0f, -2.0f}, {1, 2})).to_vector();
  CHECK(y[0] == Approx(0.4768116).epsilon(1e-6));
  CHECK(y[1] == Approx(1.4621172).epsilon(1e-6));
  CHECK(mlp->extra_repr() == "width=2, hidden=2");
}

TEST_CASE("SwiGLU matches the formula in double on random weights", "[swiglu]") {
  tp::manual_seed(31);
  nn::SwiGLU mlp(6, 10);
  tp::Tensor x = tp::randn({2, 3, 6});
  std::vector<float> y = mlp(x).to_vector();
  CHECK(mlp(x).shape() == tp::Shape{2, 3, 6});
  std::vector<double> want =
      swiglu_reference(x.to_vector(), mlp->gate_proj->weight.to_vector(),
                       mlp->up_proj->weight.to_vector(), mlp->down_proj->weight.to_vector(), 6, 10);
  for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == Approx(want[i]).epsilon(1e-5).margin(1e-6));
}

TEST_CASE("SwiGLU's gradients match finite differences", "[swiglu]") {
  tp::manual_seed(32);
  nn::SwiGLU mlp(3, 4);
  tp::Tensor x = tp::randn({2, 3}).set_requires_grad(true);
  tp::Tensor g = tp::randn({2, 3});
  tp::sum(mlp(x) * g).backward();
  std::vector<std::vector<float>> values = {x.to_vector(), mlp->gate_proj->weight.to_vector(),
                                            mlp->up_proj->weight.to_vector(),
                                            mlp->down_proj->weight.to_vector()};
  std::vector<std::vector<float>> grads = {
      x.grad().to_vector(), mlp->gate_proj->weight.grad().to_vector(),
      mlp->up_proj->weight.grad().to_vector(), mlp->down_proj->weight.grad().to_vector()};
  const std::vector<float> gv = g.to_vector();
  auto loss = [&](const std::vector<std::vector<float>>& v) {
    std::vector<double> y = swiglu_reference(v[0], v[1], v[2], v[3], 3, 4);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * gv[i];
    return s;
  };
  const float h = 1e-3f;
  for (size_t t = 0; t < values.size(); ++t)
    for (size_t i = 0; i < values[t].size(); ++i) {
      auto plus = values, minus = values;
      plus[t][i] += h, minus[t][i] -= h;
      INFO("tensor " << t << " element " << i);
      CHECK(grads[t][i] == Approx((loss(plus) - loss(minus)) / (2 * h)).epsilon(1e-2).margin(1e-3));
    }
}

TEST_CASE("SwiGLU runs in bfloat16 and refuses bad sizes", "[swiglu]") {
  tp::manual_seed(33);
  nn::SwiGLU mlp(8, 16);
  tp::Tensor x = tp::randn({4, 8});
  std::vector<float> full = mlp(x).to_vector();
  mlp->to(tp::DType::BFloat16);
  tp::Tensor y = mlp(x.to(tp::DType::BFloat16));
  CHECK(y.dtype() == tp::DType::BFloat16);
  std::vector<float> half = y.to_vector();
  for (size_t i = 0; i < full.size(); ++i)
    CHECK(half[i] == Approx(full[i]).epsilon(3e-2).margin(3e-2));
  CHECK_THROWS_WITH(mlp(tp::ones({2, 3})), Catch::Contains("expected input [..., 8], got [2, 3]"));
  CHECK_THROWS_WITH(nn::SwiGLU(0, 4), Catch::Contains("width and hidden must be positive"));
}
