// Tests for ops/attention.h beyond the op table: agreement with the composed form, causality,
// shape errors, and the memory kept for the backward.
#include <catch2/catch.hpp>
#include <cmath>

#include "tensors/tensors.h"

namespace tp = tensorplay;

TEST_CASE("attention equals softmax(q k^T / sqrt(D)) v composed from matmul", "[attention]") {
  tp::Generator g(4);
  tp::Tensor q = tp::randn({2, 3, 5, 8}, {}, &g), k = tp::randn({2, 3, 5, 8}, {}, &g);
  tp::Tensor v = tp::randn({2, 3, 5, 8}, {}, &g);
  tp::Tensor scores = tp::matmul(q, tp::transpose(k, -1, -2)) * (1.0f / std::sqrt(8.0f));
  tp::Tensor composed = tp::matmul(tp::softmax(scores, -1), v);
  auto a = tp::scaled_dot_product_attention(q, k, v, false).to_vector();
  auto b = composed.to_vector();
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-5));
}

TEST_CASE("causal attention: the first query sees only the first key", "[attention]") {
  tp::Tensor q = tp::randn({1, 1, 4, 2}), k = tp::randn({1, 1, 4, 2});
  tp::Tensor v = tp::randn({1, 1, 4, 3});
  auto out = tp::scaled_dot_product_attention(q, k, v, true).to_vector();
  auto vv = v.to_vector();
  for (int e = 0; e < 3; ++e) CHECK(out[e] == Approx(vv[e]));
  // Changing a later key does not change earlier outputs.
  tp::Tensor k2 = tp::cat({tp::slice0(k.reshape({4, 2}), 0, 3), tp::ones({1, 2}) * 9.0f}, 0);
  auto out2 = tp::scaled_dot_product_attention(q, k2.reshape({1, 1, 4, 2}), v, true).to_vector();
  for (int i = 0; i < 9; ++i) CHECK(out2[i] == out[i]);
}

TEST_CASE("attention shape errors name the shapes", "[attention]") {
  tp::Tensor q = tp::ones({1, 2, 4, 8});
  CHECK_THROWS_WITH(tp::scaled_dot_product_attention(q, tp::ones({1, 2, 4, 6}), q, false),
                    Catch::Contains("head sizes differ"));
  CHECK_THROWS_WITH(tp::scaled_dot_product_attention(q, q, tp::ones({1, 2, 3, 8}), false),
                    Catch::Contains("sequence lengths differ"));
  CHECK_THROWS_WITH(tp::scaled_dot_product_attention(q, tp::ones({1, 3, 4, 8}), q, true),
                    Catch::Contains("batch dimensions differ"));
  CHECK_THROWS_WITH(tp::scaled_dot_product_attention(q, tp::ones({2, 4, 8}), q, true),
                    Catch::Contains("same rank"));
}

TEST_CASE("long sequences keep no attention probabilities for the backward", "[attention]") {
  // [B*H, T, T] probabilities would be 4 MiB; q, k and v are 3 x 128 KiB.
  const int64_t heads = 4, t = 512, d = 16;
  tp::Generator g(4);
  tp::Tensor q = tp::randn({1, heads, t, d}, {}, &g).requires_grad_();
  tp::Tensor k = tp::randn({1, heads, t, d}, {}, &g).requires_grad_();
  tp::Tensor v = tp::randn({1, heads, t, d}, {}, &g).requires_grad_();
  size_t before = tp::host_memory_stats().allocated_bytes;
  tp::Tensor out = tp::scaled_dot_product_attention(q, k, v, /*causal=*/true);
  size_t held = tp::host_memory_stats().allocated_bytes - before;
  CHECK(held == static_cast<size_t>(out.nbytes()));  // the output alone
  tp::sum(out).backward();
  CHECK(q.grad().defined());
  CHECK(k.grad().defined());
  CHECK(v.grad().defined());
}
