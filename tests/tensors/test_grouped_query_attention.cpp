// Tests for nn/grouped_query_attention.h: a case worked by hand, random weights against the
// definition in double (short and long sequences, the latter through the fused kernel), grouped
// heads equal to multi-head attention with repeated key-value weights (values and gradients),
// repeat_kv, bfloat16, and bad sizes.
#include <catch2/catch.hpp>
#include <cmath>

#include "tensorplay/nn/grouped_query_attention.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

namespace {

void set(tp::Tensor& p, const std::vector<float>& values) {
  tp::NoGradGuard no_grad;
  p.copy_(tp::from_vector(values, p.shape()));
}

// Row `t` of one head (D channels at `v`) turned as transformers' rotate-half rotary does.
void rotate(double* v, int64_t t, int64_t d, double theta) {
  const int64_t half = d / 2;
  for (int64_t c = 0; c < half; ++c) {
    const double angle = t * std::pow(theta, -2.0 * c / d);
    const double a = v[c], b = v[c + half];
    v[c] = a * std::cos(angle) - b * std::sin(angle);
    v[c + half] = b * std::cos(angle) + a * std::sin(angle);
  }
}

// y = W x for every row of x [rows, in], W [out, in], in double.
std::vector<double> project(const std::vector<double>& x, const std::vector<float>& w, int64_t in,
                            int64_t out) {
  const int64_t rows = static_cast<int64_t>(x.size()) / in;
  std::vector<double> y(rows * out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i) s += double(w[o * in + i]) * x[r * in + i];
      y[r * out + o] = s;
    }
  return y;
}

// The module's output from its definition, in double, for x [B, T, W].
std::vector<double> attention_reference(nn::GroupedQueryAttentionImpl& m, const tp::Tensor& x) {
  const auto& o = m.options();
  const int64_t b_n = x.size(0), t_n = x.size(1), w = o.width, d = m.head_dim();
  const int64_t groups = o.heads / o.kv_heads;
  std::vector<float> xf = x.to_vector();
  std::vector<double> xd(xf.begin(), xf.end());
  std::vector<double> q = project(xd, m.q_proj->weight.to_vector(), w, o.heads * d);
  std::vector<double> k = project(xd, m.k_proj->weight.to_vector(), w, o.kv_heads * d);
  std::vector<double> v = project(xd, m.v_proj->weight.to_vector(), w, o.kv_heads * d);
  for (int64_t r = 0; r < b_n * t_n; ++r) {
    for (int64_t h = 0; h < o.heads; ++h)
      rotate(&q[(r * o.heads + h) * d], r % t_n, d, o.rope_theta);
    for (int64_t h = 0; h < o.kv_heads; ++h)
      rotate(&k[(r * o.kv_heads + h) * d], r % t_n, d, o.rope_theta);
  }
  std::vector<double> y(b_n * t_n * o.heads * d, 0.0);
  for (int64_t b = 0; b < b_n; ++b)
    for (int64_t h = 0; h < o.heads; ++h)
      for (int64_t i = 0; i < t_n; ++i) {
        const double* qi = &q[((b * t_n + i) * o.heads + h) * d];
        std::vector<double> p(i + 1);
        double top = -1e300, total = 0;
        for (int64_t j = 0; j <= i; ++j) {
          const double* kj = &k[((b * t_n + j) * o.kv_heads + h / groups) * d];
          double s = 0;
          for (int64_t c = 0; c < d; ++c) s += qi[c] * kj[c];
          p[j] = s / std::sqrt(double(d));
          top = std::max(top, p[j]);
        }
        for (auto& e : p) total += (e = std::exp(e - top));
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t c = 0; c < d; ++c)
            y[((b * t_n + i) * o.heads + h) * d + c] +=
                p[j] / total * v[((b * t_n + j) * o.kv_heads + h / groups) * d + c];
      }
  return project(y, m.o_proj->weight.to_vector(), o.heads * d, w);
}

// A multi-head twin of a grouped-query module: k_proj and v_proj with each key-value head's rows
// repeated for every query head of its group, the other weights shared by value.
nn::GroupedQueryAttention multi_head_twin(nn::GroupedQueryAttentionImpl& m) {
  auto o = m.options();
  const int64_t d = m.head_dim(), groups = o.heads / o.kv_heads, w = o.width;
  o.kv_heads = o.heads;
  nn::GroupedQueryAttention twin(o);
  auto repeated = [&](const tp::Tensor& weight) {
    std::vector<float> src = weight.to_vector(), out;
    for (int64_t h = 0; h < o.heads; ++h)
      out.insert(out.end(), src.begin() + (h / groups) * d * w,
                 src.begin() + (h / groups + 1) * d * w);
    return out;
  };
  set(twin->q_proj->weight, m.q_proj->weight.to_vector());
  set(twin->k_proj->weight, repeated(m.k_proj->weight));
  set(twin->v_proj->weight, repeated(m.v_proj->weight));
  set(twin->o_proj->weight, m.o_proj->weight.to_vector());
  return twin;
}

}  // namespace

TEST_CASE("GroupedQueryAttention: one head of size 2 over two positions, by hand", "[gqa]") {
  nn::GroupedQueryAttention attn(nn::GroupedQueryAttentionOptions{
      .width = 2, .heads = 1, .kv_heads = 1, .context_length = 4, .rope_theta = 10000.0f});
  for (auto* p :
       {&attn->q_proj->weight, &attn->k_proj->weight, &attn->v_proj->weight, &attn->o_proj->weight})
    set(*p, {1, 0, 0, 1});
  // x = e0 at position 0, e1 at position 1. Position 0 is not turned; position 1 turns by 1 rad:
  // q1 = k1 = (-sin 1, cos 1), k0 = (1, 0). Row 0 sees only itself: y0 = v0 = (1, 0). Row 1:
  // scores (q1.k0, q1.k1) / sqrt 2 = (-sin 1, 1) / sqrt 2, y1 = p0 (1, 0) + p1 (0, 1).
  std::vector<float> y = attn(tp::from_vector({1, 0, 0, 1}, {1, 2, 2})).to_vector();
  const double s0 = -std::sin(1.0) / std::sqrt(2.0), s1 = 1.0 / std::sqrt(2.0);
  const double p0 = std::exp(s0) / (std::exp(s0) + std::exp(s1)), p1 = 1.0 - p0;
  CHECK(y[0] == Approx(1.0).epsilon(1e-6));
  CHECK(y[1] == Approx(0.0).margin(1e-6));
  CHECK(y[2] == Approx(p0).epsilon(1e-6));
  CHECK(y[3] == Approx(p1).epsilon(1e-6));
}

TEST_CASE("GroupedQueryAttention matches its definition in double", "[gqa]") {
  tp::manual_seed(41);
  for (int64_t time : {5, 48}) {  // 48 positions of head size 4 take the fused kernel
    nn::GroupedQueryAttention attn(nn::GroupedQueryAttentionOptions{
        .width = 24, .heads = 6, .kv_heads = 2, .context_length = 64, .rope_theta = 500.0f});
    std::vector<std::string> names;
    for (auto& [n, p] : attn->named_parameters()) names.push_back(n);
    CHECK(names == std::vector<std::string>{"q_proj.weight", "k_proj.weight", "v_proj.weight",
                                            "o_proj.weight"});
    CHECK(attn->k_proj->weight.shape() == tp::Shape{8, 24});
    tp::Tensor x = tp::randn({2, time, 24});
    std::vector<float> y = attn(x).to_vector();
    std::vector<double> want = attention_reference(*attn, x);
    INFO("time " << time);
    for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == Approx(want[i]).epsilon(1e-4).margin(1e-5));
  }
}

TEST_CASE("grouped-query attention equals multi-head attention with repeated keys and values",
          "[gqa]") {
  tp::manual_seed(42);
  nn::GroupedQueryAttention gqa(nn::GroupedQueryAttentionOptions{
      .width = 32, .heads = 4, .kv_heads = 2, .context_length = 16, .rope_theta = 10000.0f});
  nn::GroupedQueryAttention mha = multi_head_twin(*gqa);
  tp::Tensor x = tp::randn({3, 10, 32}), g = tp::randn({3, 10, 32});
  tp::Tensor y = gqa(x), z = mha(x);
  std::vector<float> yv = y.to_vector(), zv = z.to_vector();
  for (size_t i = 0; i < yv.size(); ++i) CHECK(yv[i] == Approx(zv[i]).epsilon(1e-5).margin(1e-6));
  tp::sum(y * g).backward();
  tp::sum(z * g).backward();
  for (const char* name : {"q_proj.weight", "o_proj.weight"}) {
    INFO(name);
    std::vector<float> a = gqa->find_tensor(name).grad().to_vector();
    std::vector<float> b = mha->find_tensor(name).grad().to_vector();
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-4).margin(1e-5));
  }
  // A shared key-value head's gradient is the sum of its repeats' gradients.
  const int64_t rows = 8 * 32;  // one head's rows of k_proj
  for (const char* name : {"k_proj.weight", "v_proj.weight"}) {
    INFO(name);
    std::vector<float> a = gqa->find_tensor(name).grad().to_vector();
    std::vector<float> b = mha->find_tensor(name).grad().to_vector();
    for (int64_t kv = 0; kv < 2; ++kv)
      for (int64_t i = 0; i < rows; ++i)
        CHECK(a[kv * rows + i] ==
              Approx(double(b[(2 * kv) * rows + i]) + b[(2 * kv + 1) * rows + i])
                  .epsilon(1e-4)
                  .margin(1e-5));
  }
}

TEST_CASE("repeat_kv repeats each key-value head for its group", "[gqa]") {
  tp::Tensor x = tp::arange(2 * 2 * 3 * 1).reshape({2, 2, 3, 1});  // [B=2, kv=2, T=3, D=1]
  tp::Tensor y = nn::repeat_kv(x, 3);
  CHECK(y.shape() == tp::Shape{2, 6, 3, 1});
  std::vector<float> v = y.to_vector();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 6; ++h)
      for (int64_t t = 0; t < 3; ++t) CHECK(v[(b * 6 + h) * 3 + t] == (b * 2 + h / 3) * 3 + t);
  CHECK(nn::repeat_kv(x, 1).is_same(x));
  CHECK_THROWS_WITH(nn::repeat_kv(tp::ones({2, 3}), 2), Catch::Contains("[B, kv_heads, T, D]"));
}

TEST_CASE("repeat_kv_tokens_first is repeat_kv on heads laid out tokens first", "[gqa]") {
  tp::Tensor x = tp::randn({2, 3, 2, 4});  // [B, T, kv, D]
  tp::Tensor y = nn::repeat_kv_tokens_first(x, 3);
  CHECK(y.shape() == tp::Shape{2, 3, 6, 4});
  tp::Tensor want = tp::permute(nn::repeat_kv(tp::permute(x, {0, 2, 1, 3}), 3), {0, 2, 1, 3});
  CHECK(y.to_vector() == want.to_vector());
  CHECK(nn::repeat_kv_tokens_first(x, 1).is_same(x));
  CHECK_THROWS_WITH(nn::repeat_kv_tokens_first(tp::ones({2, 3}), 2),
                    Catch::Contains("[B, T, kv_heads, D]"));
}

TEST_CASE("GroupedQueryAttention runs in bfloat16 and refuses bad sizes", "[gqa]") {
  tp::manual_seed(43);
  nn::GroupedQueryAttention attn(nn::GroupedQueryAttentionOptions{
      .width = 16, .heads = 4, .kv_heads = 1, .context_length = 8});
  tp::Tensor x = tp::randn({2, 8, 16});
  std::vector<float> full = attn(x).to_vector();
  attn->to(tp::DType::BFloat16);
  tp::Tensor y = attn(x.to(tp::DType::BFloat16));
  CHECK(y.dtype() == tp::DType::BFloat16);
  std::vector<float> half = y.to_vector();
  for (size_t i = 0; i < full.size(); ++i)
    CHECK(half[i] == Approx(full[i]).epsilon(5e-2).margin(2e-2));
  CHECK_THROWS_WITH(attn(tp::ones({2, 3, 8})), Catch::Contains("expected input [B, T, 16]"));
  CHECK_THROWS_WITH(attn(tp::ones({1, 9, 16})), Catch::Contains("T <= 8"));
  using Options = nn::GroupedQueryAttentionOptions;
  CHECK_THROWS_WITH(nn::GroupedQueryAttention(
                        Options{.width = 16, .heads = 4, .kv_heads = 3, .context_length = 8}),
                    Catch::Contains("kv_heads (3) must divide heads (4)"));
  CHECK_THROWS_WITH(nn::GroupedQueryAttention(
                        Options{.width = 18, .heads = 4, .kv_heads = 1, .context_length = 8}),
                    Catch::Contains("heads (4) must divide width (18)"));
  CHECK_THROWS_WITH(nn::GroupedQueryAttention(
                        Options{.width = 12, .heads = 4, .kv_heads = 1, .context_length = 8}),
                    Catch::Contains("must be even"));
  CHECK_THROWS_WITH(nn::GroupedQueryAttention(
                        Options{.width = 16, .heads = 4, .kv_heads = 0, .context_length = 8}),
                    Catch::Contains("must be positive"));
}
