// Tests for nn/rms_norm.h: the normalised values against the formula in double, the weight,
// gradients against finite differences, bfloat16, and bad sizes.
#include <catch2/catch.hpp>
#include <cmath>

#include "tensorplay/nn/rms_norm.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

namespace {

// x / sqrt(mean(x^2) + eps) * w over rows of length d, in double.
std::vector<double> rms_norm_reference(const std::vector<float>& x, const std::vector<float>& w,
                                       size_t d, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double ms = 0;
    for (size_t i = 0; i < d; ++i) ms += double(x[r * d + i]) * x[r * d + i];
    const double scale = 1.0 / std::sqrt(ms / d + eps);
    for (size_t i = 0; i < d; ++i) y[r * d + i] = x[r * d + i] * scale * w[i];
  }
  return y;
}

}  // namespace

TEST_CASE("RMSNorm scales each row to unit root mean square, then by its weight", "[rms_norm]") {
  nn::RMSNorm norm(6, 1e-5f);
  std::vector<std::string> names;
  for (auto& [n, p] : norm->named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"weight"});
  CHECK(norm->weight.to_vector() == std::vector<float>(6, 1.0f));
  tp::manual_seed(11);
  {
    tp::NoGradGuard no_grad;
    norm->weight.copy_(tp::randn({6}) + 1.0f);
  }
  tp::Tensor x = tp::randn({2, 3, 6}) * 3.0f;
  std::vector<float> y = norm(x).to_vector();
  std::vector<double> want = rms_norm_reference(x.to_vector(), norm->weight.to_vector(), 6, 1e-5);
  for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == Approx(want[i]).epsilon(1e-5).margin(1e-6));
  CHECK(norm(x).shape() == tp::Shape{2, 3, 6});
  CHECK_THAT(norm->extra_repr(), Catch::StartsWith("6, eps="));
}

TEST_CASE("RMSNorm's gradients match finite differences", "[rms_norm]") {
  tp::manual_seed(12);
  nn::RMSNorm norm(5);
  {
    tp::NoGradGuard no_grad;
    norm->weight.copy_(tp::randn({5}) + 1.0f);
  }
  tp::Tensor x = tp::randn({3, 5}).set_requires_grad(true);
  tp::Tensor g = tp::randn({3, 5});
  tp::sum(norm(x) * g).backward();
  const std::vector<float> dx = x.grad().to_vector(), dw = norm->weight.grad().to_vector();
  auto loss = [&](const std::vector<float>& xv, const std::vector<float>& wv) {
    std::vector<double> y = rms_norm_reference(xv, wv, 5, 1e-6);
    std::vector<float> gv = g.to_vector();
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * gv[i];
    return s;
  };
  const std::vector<float> xv = x.to_vector(), wv = norm->weight.to_vector();
  const float h = 1e-3f;
  for (size_t i = 0; i < xv.size(); ++i) {
    std::vector<float> plus = xv, minus = xv;
    plus[i] += h, minus[i] -= h;
    CHECK(dx[i] == Approx((loss(plus, wv) - loss(minus, wv)) / (2 * h)).epsilon(1e-2).margin(1e-3));
  }
  for (size_t i = 0; i < wv.size(); ++i) {
    std::vector<float> plus = wv, minus = wv;
    plus[i] += h, minus[i] -= h;
    CHECK(dw[i] == Approx((loss(xv, plus) - loss(xv, minus)) / (2 * h)).epsilon(1e-2).margin(1e-3));
  }
}

TEST_CASE("RMSNorm runs in bfloat16 and refuses bad sizes", "[rms_norm]") {
  tp::manual_seed(13);
  nn::RMSNorm norm(8);
  tp::Tensor x = tp::randn({4, 8});
  std::vector<float> full = norm(x).to_vector();
  norm->to(tp::DType::BFloat16);
  tp::Tensor y = norm(x.to(tp::DType::BFloat16));
  CHECK(y.dtype() == tp::DType::BFloat16);
  std::vector<float> half = y.to_vector();
  for (size_t i = 0; i < full.size(); ++i)
    CHECK(half[i] == Approx(full[i]).epsilon(2e-2).margin(2e-2));
  CHECK_THROWS_WITH(norm(tp::ones({2, 3})), Catch::Contains("expected input [..., 8], got [2, 3]"));
  CHECK_THROWS_WITH(nn::RMSNorm(0), Catch::Contains("dim must be positive"));
  CHECK_THROWS_WITH(nn::RMSNorm(4, -1.0f), Catch::Contains("eps must be >= 0"));
}
