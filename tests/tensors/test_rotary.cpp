// Tests for nn/rotary.h: the tables, the rotation against the formula in double, what rotary
// positions promise (norms kept, position 0 unchanged, scores depend on relative position only),
// gradients, bfloat16, and bad sizes.
#include <catch2/catch.hpp>
#include <cmath>

#include "tensorplay/nn/rotary.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

namespace {

// Element (t, k) of x [T, D] rotated, in double from the definition.
double rotated_reference(const std::vector<float>& x, int64_t t, int64_t k, int64_t d,
                         double theta) {
  const int64_t half = d / 2, c = k % half;
  const double angle = t * std::pow(theta, -2.0 * c / d);
  const double own = x[t * d + k];
  const double other = k < half ? -x[t * d + k + half] : x[t * d + k - half];
  return own * std::cos(angle) + other * std::sin(angle);
}

double dot(const std::vector<float>& a, const std::vector<float>& b, int64_t row_a, int64_t row_b,
           int64_t d) {
  double s = 0;
  for (int64_t k = 0; k < d; ++k) s += double(a[row_a * d + k]) * b[row_b * d + k];
  return s;
}

}  // namespace

TEST_CASE("RotaryEmbedding turns channel pairs by position times frequency", "[rotary]") {
  nn::RotaryEmbedding rope(8, 16, 500.0f);
  CHECK(rope->cos.shape() == tp::Shape{16, 8});
  CHECK(rope->state_dict().empty());  // derived tables are not saved
  CHECK(rope->named_buffers().size() == 2);
  tp::manual_seed(21);
  tp::Tensor x = tp::randn({2, 3, 10, 8});  // [B, heads, T, D]
  std::vector<float> y = rope(x).to_vector(), xv = x.to_vector();
  for (int64_t row = 0; row < 6; ++row) {
    std::vector<float> part(xv.begin() + row * 80, xv.begin() + (row + 1) * 80);
    for (int64_t t = 0; t < 10; ++t)
      for (int64_t k = 0; k < 8; ++k)
        CHECK(y[row * 80 + t * 8 + k] ==
              Approx(rotated_reference(part, t, k, 8, 500.0)).epsilon(1e-5).margin(1e-5));
  }
}

TEST_CASE("RotaryEmbedding keeps norms and makes scores depend on relative position", "[rotary]") {
  nn::RotaryEmbedding rope(16, 64);
  tp::manual_seed(22);
  // The same query and key at every position.
  tp::Tensor q1 = tp::randn({1, 16}), k1 = tp::randn({1, 16});
  std::vector<tp::Tensor> qs(64, q1), ks(64, k1);
  std::vector<float> q = rope(tp::cat(qs, 0)).to_vector(), k = rope(tp::cat(ks, 0)).to_vector();
  std::vector<float> q0 = q1.to_vector();
  for (int64_t i = 0; i < 16; ++i) CHECK(q[i] == q0[i]);  // position 0 is not turned
  for (int64_t t : {1, 17, 63})
    CHECK(dot(q, q, t, t, 16) == Approx(dot(q0, q0, 0, 0, 16)).epsilon(1e-5));
  // q at m and k at n score as q at m + s and k at n + s.
  for (auto [m, n, s] : {std::tuple{5, 2, 30}, std::tuple{0, 9, 40}, std::tuple{33, 33, 7}})
    CHECK(dot(q, k, m, n, 16) == Approx(dot(q, k, m + s, n + s, 16)).epsilon(1e-4).margin(1e-4));
}

TEST_CASE("RotaryEmbedding's gradient is the inverse rotation", "[rotary]") {
  nn::RotaryEmbedding rope(4, 8);
  tp::manual_seed(23);
  tp::Tensor x = tp::randn({2, 6, 4}).set_requires_grad(true);
  tp::Tensor g = tp::randn({2, 6, 4});
  tp::sum(rope(x) * g).backward();
  // A rotation's transpose turns back: d/dx sum(R x . g) = R^T g, which has g's norm per pair.
  std::vector<float> dx = x.grad().to_vector(), gv = g.to_vector();
  for (int64_t row = 0; row < 12; ++row)
    for (int64_t c = 0; c < 2; ++c) {
      auto at = [&](const std::vector<float>& v, int64_t k) { return double(v[row * 4 + k]); };
      CHECK(std::hypot(at(dx, c), at(dx, c + 2)) ==
            Approx(std::hypot(at(gv, c), at(gv, c + 2))).epsilon(1e-5));
    }
  // Position 0 passes the gradient unchanged.
  for (int64_t k = 0; k < 4; ++k) CHECK(dx[k] == gv[k]);
}

TEST_CASE("RotaryEmbedding turns heads laid out tokens first as the permuted ones", "[rotary]") {
  nn::RotaryEmbedding heads_first(8, 6), tokens_first(8, 6);
  tokens_first->time_dim = 1;
  tp::Tensor base = tp::randn({2, 5, 3, 8});  // [B, T, H, D]
  tp::Tensor upstream = tp::randn({2, 5, 3, 8});
  tp::Tensor x = base.detach().requires_grad_(), y = base.detach().requires_grad_();
  tp::Tensor a = tokens_first(x);
  tp::Tensor b = tp::permute(heads_first(tp::permute(y, {0, 2, 1, 3})), {0, 2, 1, 3});
  CHECK(a.to_vector() == b.to_vector());
  tp::sum(a * upstream).backward();
  tp::sum(b * upstream).backward();
  CHECK(x.grad().to_vector() == y.grad().to_vector());
  CHECK_THROWS_WITH(tokens_first(tp::ones({2, 7, 3, 8})),
                    Catch::Contains("expected input [B, T, ..., 8] with T <= 6"));
}

TEST_CASE("RotaryEmbedding runs in bfloat16 and refuses bad sizes", "[rotary]") {
  nn::RotaryEmbedding rope(8, 4);
  tp::manual_seed(24);
  tp::Tensor x = tp::randn({3, 4, 8});
  std::vector<float> full = rope(x).to_vector();
  tp::Tensor y = rope(x.to(tp::DType::BFloat16));
  CHECK(y.dtype() == tp::DType::BFloat16);
  std::vector<float> half = y.to_vector();
  for (size_t i = 0; i < full.size(); ++i) CHECK(half[i] == Approx(full[i]).margin(3e-2));
  CHECK_THROWS_WITH(rope(tp::ones({5, 8})), Catch::Contains("with T <= 4, got [5, 8]"));
  CHECK_THROWS_WITH(rope(tp::ones({2, 6})), Catch::Contains("expected input [..., T, 8]"));
  CHECK_THROWS_WITH(nn::RotaryEmbedding(7, 4), Catch::Contains("head_dim must be even"));
  CHECK_THROWS_WITH(nn::RotaryEmbedding(8, 0), Catch::Contains("context_length must be positive"));
  CHECK_THROWS_WITH(nn::RotaryEmbedding(8, 4, 0.0f), Catch::Contains("theta must be positive"));
}
