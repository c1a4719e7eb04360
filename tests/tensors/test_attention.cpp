// Tests for ops/attention.h beyond the op table: agreement with the composed form, causality,
// shape errors, and the memory kept for the backward.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "tensorplay/core/autograd/node.h"
#include "tensorplay/core/cpu_isa.h"
#include "tensorplay/tensor.h"

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
  // The output and one log-sum-exp per query row (the fused kernel's, for its backward).
  CHECK(held == static_cast<size_t>(out.nbytes() + heads * t * sizeof(float)));
  tp::sum(out).backward();
  CHECK(q.grad().defined());
  CHECK(k.grad().defined());
  CHECK(v.grad().defined());
}

namespace {

struct AttentionRun {
  std::vector<float> out, gq, gk, gv;
};

AttentionRun run_attention(int64_t t_q, int64_t t_k, int64_t d, int64_t d_v, bool causal,
                           tp::AttentionKernel kernel) {
  tp::Generator g(11);
  tp::Tensor q = tp::randn({2, 3, t_q, d}, {}, &g).requires_grad_();
  tp::Tensor k = tp::randn({2, 3, t_k, d}, {}, &g).requires_grad_();
  tp::Tensor v = tp::randn({2, 3, t_k, d_v}, {}, &g).requires_grad_();
  tp::Tensor seed = tp::randn({2, 3, t_q, d_v}, {}, &g);
  tp::Tensor out = tp::scaled_dot_product_attention(q, k, v, causal, kernel);
  tp::sum(out * seed).backward();
  return {out.to_vector(), q.grad().to_vector(), k.grad().to_vector(), v.grad().to_vector()};
}

void check_close(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double scale = 0, worst = 0;
  for (float w : want) scale = std::max(scale, std::abs(double(w)));
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(double(got[i]) - double(want[i])));
  CHECK(worst <= 2e-5 * std::max(scale, 1.0));
}

}  // namespace

TEST_CASE("fused attention matches the plain path, forward and backward", "[attention]") {
  // Lengths that are and are not multiples of the kernel's 64-row tiles and 256-key blocks
  // (several blocks per row: the online softmax's rescaling), t_q < t_k and t_q > t_k.
  struct Dims {
    int64_t t_q, t_k, d, d_v;
  };
  for (Dims dims :
       {Dims{5, 5, 4, 4}, Dims{64, 64, 8, 8}, Dims{100, 130, 16, 8}, Dims{150, 70, 8, 16},
        Dims{200, 200, 32, 32}, Dims{70, 600, 8, 8}, Dims{300, 300, 8, 8}}) {
    for (bool causal : {false, true}) {
      CAPTURE(dims.t_q, dims.t_k, dims.d, dims.d_v, causal);
      auto plain =
          run_attention(dims.t_q, dims.t_k, dims.d, dims.d_v, causal, tp::AttentionKernel::Plain);
      auto fused =
          run_attention(dims.t_q, dims.t_k, dims.d, dims.d_v, causal, tp::AttentionKernel::Fused);
      check_close(fused.out, plain.out);
      check_close(fused.gq, plain.gq);
      check_close(fused.gk, plain.gk);
      check_close(fused.gv, plain.gv);
      auto again =
          run_attention(dims.t_q, dims.t_k, dims.d, dims.d_v, causal, tp::AttentionKernel::Fused);
      CHECK(again.out == fused.out);  // a rerun gives the same bits
      CHECK(again.gq == fused.gq);
    }
  }
}

TEST_CASE("fused attention holds no probability matrix, and long contexts take it", "[attention]") {
  // At t = 2048 the [B*H, T, T] probabilities would be 64 MiB; q, k, v are 512 KiB each.
  const int64_t heads = 4, t = 2048, d = 16;
  tp::Generator g(5);
  tp::Tensor q = tp::randn({1, heads, t, d}, {}, &g).requires_grad_();
  tp::Tensor k = tp::randn({1, heads, t, d}, {}, &g).requires_grad_();
  tp::Tensor v = tp::randn({1, heads, t, d}, {}, &g).requires_grad_();
  tp::host_reset_peak_memory_stats();
  const size_t before = tp::host_memory_stats().allocated_bytes;
  tp::Tensor out = tp::scaled_dot_product_attention(q, k, v, /*causal=*/true);
  CHECK(out.grad_fn()->name() == std::string("FlashAttentionBackward"));
  const size_t held = tp::host_memory_stats().allocated_bytes - before;
  CHECK(held == static_cast<size_t>(out.nbytes() + heads * t * sizeof(float)));
  tp::sum(out).backward();
  // Never a [T, T] matrix per head (16 MiB each): the peak stays within a few copies of q.
  CHECK(tp::host_memory_stats().peak_allocated_bytes < before + size_t{8} * q.nbytes());
  CHECK(std::isfinite(q.grad().to_vector()[0]));
}

TEST_CASE("packed attention equals attention of its three slices, bit for bit, with one gradient",
          "[attention]") {
  for (tp::AttentionKernel kernel : {tp::AttentionKernel::Plain, tp::AttentionKernel::Fused}) {
    for (tp::DType dtype : {tp::DType::Float32, tp::DType::BFloat16}) {
      CAPTURE(static_cast<int>(kernel), static_cast<int>(dtype));
      tp::Generator g(9);
      tp::Tensor base = tp::randn({3, 2, 3, 70, 8}, {}, &g).to(dtype);
      tp::Tensor upstream = tp::randn({2, 3, 70, 8}, {}, &g).to(dtype);
      tp::Tensor packed = base.detach().requires_grad_(true);
      tp::Tensor sliced = base.detach().requires_grad_(true);
      tp::Tensor a = tp::scaled_dot_product_attention_packed(packed, true, kernel);
      std::vector<tp::Tensor> parts = tp::split(sliced, 1, 0);
      const tp::Shape part = {2, 3, 70, 8};
      tp::Tensor b = tp::scaled_dot_product_attention(
          parts[0].reshape(part), parts[1].reshape(part), parts[2].reshape(part), true, kernel);
      CHECK(a.dtype() == dtype);
      CHECK(a.to_vector() == b.to_vector());
      tp::sum(a * upstream).backward();
      tp::sum(b * upstream).backward();
      REQUIRE(packed.grad().defined());
      CHECK(packed.grad().shape() == base.shape());
      CHECK(packed.grad().to_vector() == sliced.grad().to_vector());
    }
  }
  CHECK_THROWS_WITH(
      tp::scaled_dot_product_attention_packed(tp::zeros({2, 1, 4, 2}), true),
      Catch::Contains("expected qkv [3, ..., T, D]") && Catch::Contains("[2, 1, 4, 2]"));
}

TEST_CASE("qkvpacked attention equals attention of the permuted heads, with one gradient",
          "[attention]") {
  // [B, T, 3, H, D] as a fused projection writes it, against the permuted [3, B, H, T, D] form:
  // several query tiles and key blocks (T = 300), both kernels, causal or not.
  const int64_t b = 2, t = 300, h = 3, d = 8;
  for (tp::AttentionKernel kernel : {tp::AttentionKernel::Plain, tp::AttentionKernel::Fused}) {
    for (bool causal : {true, false}) {
      CAPTURE(static_cast<int>(kernel), causal);
      tp::Generator g(21);
      tp::Tensor base = tp::randn({b, t, 3, h, d}, {}, &g);
      tp::Tensor upstream = tp::randn({b, t, h, d}, {}, &g);
      tp::Tensor qkv = base.detach().requires_grad_(true);
      tp::Tensor stacked = base.detach().requires_grad_(true);
      tp::Tensor a = tp::scaled_dot_product_attention_qkvpacked(qkv, causal, kernel);
      tp::Tensor heads_first = tp::scaled_dot_product_attention_packed(
          tp::permute(stacked, {2, 0, 3, 1, 4}), causal, kernel);
      tp::Tensor want = tp::permute(heads_first, {0, 2, 1, 3});
      REQUIRE(a.shape() == tp::Shape{b, t, h, d});
      check_close(a.to_vector(), want.to_vector());
      tp::sum(a * upstream).backward();
      tp::sum(want * upstream).backward();
      REQUIRE(qkv.grad().defined());
      CHECK(qkv.grad().shape() == base.shape());
      check_close(qkv.grad().to_vector(), stacked.grad().to_vector());
    }
  }
}

TEST_CASE("tokens-first attention equals attention of the permuted heads", "[attention]") {
  // q [B, Tq, H, D], k [B, Tk, H, D], v [B, Tk, H, Dv] against the [B, H, T, D] form: t_q and t_k
  // apart, several query tiles and key blocks, both kernels, causal or not.
  const int64_t b = 2, t_q = 150, t_k = 300, h = 3, d = 8, d_v = 16;
  auto heads_first = [](const tp::Tensor& x) { return tp::permute(x, {0, 2, 1, 3}); };
  for (tp::AttentionKernel kernel : {tp::AttentionKernel::Plain, tp::AttentionKernel::Fused}) {
    for (bool causal : {true, false}) {
      CAPTURE(static_cast<int>(kernel), causal);
      tp::Generator g(23);
      std::vector<tp::Tensor> in = {tp::randn({b, t_q, h, d}, {}, &g),
                                    tp::randn({b, t_k, h, d}, {}, &g),
                                    tp::randn({b, t_k, h, d_v}, {}, &g)};
      tp::Tensor upstream = tp::randn({b, t_q, h, d_v}, {}, &g);
      std::vector<tp::Tensor> mine, theirs;
      for (const tp::Tensor& x : in) {
        mine.push_back(x.detach().requires_grad_(true));
        theirs.push_back(x.detach().requires_grad_(true));
      }
      tp::Tensor a =
          tp::scaled_dot_product_attention_tokens_first(mine[0], mine[1], mine[2], causal, kernel);
      tp::Tensor want = heads_first(tp::scaled_dot_product_attention(
          heads_first(theirs[0]), heads_first(theirs[1]), heads_first(theirs[2]), causal, kernel));
      REQUIRE(a.shape() == tp::Shape{b, t_q, h, d_v});
      check_close(a.to_vector(), want.to_vector());
      tp::sum(a * upstream).backward();
      tp::sum(want * upstream).backward();
      for (int i = 0; i < 3; ++i) {
        CAPTURE(i);
        check_close(mine[i].grad().to_vector(), theirs[i].grad().to_vector());
      }
    }
  }
  tp::Tensor q = tp::ones({1, 4, 2, 8});
  CHECK_THROWS_WITH(
      tp::scaled_dot_product_attention_tokens_first(q, tp::ones({1, 4, 3, 8}), q, true),
      Catch::Contains("expected q [B, Tq, H, D], k [B, Tk, H, D]") &&
          Catch::Contains("k [1, 4, 3, 8]"));
  tp::Tensor bf = tp::randn({1, 70, 2, 8}).to(tp::DType::BFloat16);
  tp::Tensor low = tp::scaled_dot_product_attention_tokens_first(bf, bf, bf, true);
  CHECK(low.dtype() == tp::DType::BFloat16);
  CHECK(low.to_vector() == heads_first(tp::scaled_dot_product_attention(
                                           heads_first(bf), heads_first(bf), heads_first(bf), true))
                               .to_vector());
}

TEST_CASE("qkvpacked attention in bfloat16 is the permuted form's, and bad shapes are named",
          "[attention]") {
  tp::Generator g(22);
  tp::Tensor base = tp::randn({2, 70, 3, 2, 8}, {}, &g).to(tp::DType::BFloat16);
  tp::Tensor a = tp::scaled_dot_product_attention_qkvpacked(base, true);
  tp::Tensor want =
      tp::permute(tp::scaled_dot_product_attention_packed(tp::permute(base, {2, 0, 3, 1, 4}), true),
                  {0, 2, 1, 3});
  CHECK(a.dtype() == tp::DType::BFloat16);
  CHECK(a.to_vector() == want.to_vector());
  CHECK_THROWS_WITH(
      tp::scaled_dot_product_attention_qkvpacked(tp::zeros({2, 4, 2, 1, 8}), true),
      Catch::Contains("expected qkv [B, T, 3, H, D]") && Catch::Contains("[2, 4, 2, 1, 8]"));
  CHECK_THROWS_WITH(tp::scaled_dot_product_attention_qkvpacked(tp::zeros({3, 4, 8}), true),
                    Catch::Contains("expected qkv [B, T, 3, H, D]"));
  tp::Tensor empty = tp::zeros({0, 4, 3, 2, 8}).requires_grad_(true);
  tp::Tensor none = tp::scaled_dot_product_attention_qkvpacked(empty, true);
  CHECK(none.shape() == tp::Shape{0, 4, 2, 8});
  tp::sum(none).backward();
  CHECK(empty.grad().shape() == empty.shape());
}

TEST_CASE("attention over an empty batch gives an empty output and gradient", "[attention]") {
  for (tp::AttentionKernel kernel : {tp::AttentionKernel::Plain, tp::AttentionKernel::Fused}) {
    CAPTURE(static_cast<int>(kernel));
    tp::Tensor q = tp::zeros({0, 2, 5, 4}).requires_grad_(true);
    tp::Tensor out = tp::scaled_dot_product_attention(q, q, q, true, kernel);
    CHECK(out.shape() == tp::Shape{0, 2, 5, 4});
    tp::sum(out).backward();
    CHECK(q.grad().shape() == q.shape());
    tp::Tensor packed = tp::zeros({3, 0, 2, 5, 4}).requires_grad_(true);
    CHECK(tp::scaled_dot_product_attention_packed(packed, true, kernel).shape() ==
          tp::Shape{0, 2, 5, 4});
  }
}

TEST_CASE("fused attention agrees on every dispatch target with the scalar loops", "[attention]") {
  // The tiles' row work (online softmax, rescaling, the backward's exp and dS) runs vector kernels
  // on the vector targets and plain loops on the scalar one; a fully masked first block (t_q >
  // t_k under the causal mask) takes the masked-row path.
  struct RestoreIsa {
    std::string saved = tp::cpu_isa();
    ~RestoreIsa() { tp::set_cpu_isa(saved); }
  } restore;
  tp::set_cpu_isa("scalar");
  const AttentionRun reference = run_attention(150, 70, 8, 16, true, tp::AttentionKernel::Fused);
  const AttentionRun wide = run_attention(130, 300, 32, 32, false, tp::AttentionKernel::Fused);
  for (const std::string& isa : tp::available_cpu_isas()) {
    CAPTURE(isa);
    tp::set_cpu_isa(isa);
    const AttentionRun got = run_attention(150, 70, 8, 16, true, tp::AttentionKernel::Fused);
    check_close(got.out, reference.out);
    check_close(got.gq, reference.gq);
    check_close(got.gk, reference.gk);
    check_close(got.gv, reference.gv);
    const AttentionRun got_wide =
        run_attention(130, 300, 32, 32, false, tp::AttentionKernel::Fused);
    check_close(got_wide.out, wide.out);
    check_close(got_wide.gq, wide.gq);
    check_close(got_wide.gk, wide.gk);
    check_close(got_wide.gv, wide.gv);
  }
}
