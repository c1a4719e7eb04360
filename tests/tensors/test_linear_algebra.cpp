// Tests for ops/linear_algebra.h beyond the op table: shape errors, dtypes, the fused bias.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

TEST_CASE("matmul, bmm and linear shape errors show both shapes", "[linear_algebra]") {
  CHECK_THROWS_WITH(tp::matmul(tp::ones({2, 3}), tp::ones({4, 5})),
                    Catch::Contains("inner dimensions differ: [2, 3] x [4, 5]"));
  CHECK_THROWS_WITH(tp::matmul(tp::ones({2, 2, 3}), tp::ones({3, 3, 4})),
                    Catch::Contains("batch dimensions differ"));
  CHECK_THROWS_WITH(tp::bmm(tp::ones({2, 3}), tp::ones({3, 4})), Catch::Contains("bmm: expected"));
  CHECK_THROWS_WITH(tp::linear(tp::ones({2, 3}), tp::ones({4, 5})),
                    Catch::Contains("does not match weight of shape [4, 5]"));
  CHECK_THROWS_WITH(tp::linear(tp::ones({2, 5}), tp::ones({4, 5}), tp::ones({3})),
                    Catch::Contains("bias of shape [3]"));
}

TEST_CASE("products of mixed dtypes are an error naming both", "[linear_algebra]") {
  tp::Tensor bf = tp::ones({2, 3}).to(tp::DType::BFloat16);
  CHECK_THROWS_WITH(tp::matmul(bf, tp::ones({3, 4})),
                    Catch::Contains("matmul: operands differ in dtype (bfloat16 and float32)"));
  CHECK_THROWS_WITH(tp::linear(tp::ones({2, 3}), bf.reshape({3, 2}).reshape({2, 3})),
                    Catch::Contains("linear: operands differ in dtype"));
  CHECK_THROWS_WITH(tp::linear(bf, bf, tp::ones({2})), Catch::Contains("module->to(DType::"));
}

TEST_CASE("bfloat16 linear and matmul accumulate in float32 and round once", "[linear_algebra]") {
  // 256 products of 1 x 1/256... summed: a bfloat16 accumulator would stall at 1 + 2^-8 steps;
  // float32 accumulation gives the exact sum, which bfloat16 represents.
  constexpr int64_t k = 512;
  tp::Tensor a = tp::full({1, k}, 1.0f).to(tp::DType::BFloat16);
  tp::Tensor b = tp::full({k, 1}, 1.0f / 64).to(tp::DType::BFloat16);
  tp::Tensor c = tp::matmul(a, b);
  CHECK(c.dtype() == tp::DType::BFloat16);
  CHECK(c.item() == 8.0f);
  tp::Tensor bias = tp::full({1}, 0.5f).to(tp::DType::BFloat16);
  tp::Tensor y = tp::linear(a, b.reshape({1, k}), bias);
  CHECK(y.dtype() == tp::DType::BFloat16);
  CHECK(y.item() == 8.5f);
}

TEST_CASE("bfloat16 products with an empty dimension", "[linear_algebra]") {
  const auto bf = tp::DType::BFloat16;
  // No rows: an empty output, and gradients of the right shapes.
  tp::Tensor w = tp::ones({4, 3}).to(bf).requires_grad_();
  tp::Tensor b = tp::ones({4}).to(bf).requires_grad_();
  tp::Tensor y = tp::linear(tp::zeros({0, 3}).to(bf), w, b);
  CHECK(y.shape() == tp::Shape{0, 4});
  tp::sum(y).backward();
  CHECK(w.grad().to_vector() == std::vector<float>(12, 0.0f));
  CHECK(b.grad().to_vector() == std::vector<float>(4, 0.0f));
  // No inner dimension: the product is zero and the output is the bias.
  tp::Tensor bias = tp::from_vector({1, 2}, {2}).to(bf);
  tp::Tensor out = tp::linear(tp::zeros({3, 0}).to(bf), tp::zeros({2, 0}).to(bf), bias);
  CHECK(out.to_vector() == std::vector<float>{1, 2, 1, 2, 1, 2});
  CHECK(tp::matmul(tp::zeros({2, 0}).to(bf), tp::zeros({0, 3}).to(bf)).to_vector() ==
        std::vector<float>(6, 0.0f));
}

TEST_CASE("a linear layer's bias is added to the finished product, bit for bit",
          "[linear_algebra]") {
  // The host adds the bias inside the product's kernel; the bits must be those of adding it to
  // the product afterwards, for every row count a microbatch may have.
  tp::Generator g(5);
  struct Dims {
    int64_t rows, in, out;
  };
  for (Dims d : {Dims{1, 3, 2}, Dims{7, 33, 17}, Dims{64, 256, 768}, Dims{130, 1024, 256}}) {
    CAPTURE(d.rows, d.in, d.out);
    tp::Tensor x = tp::randn({d.rows, d.in}, {}, &g), w = tp::randn({d.out, d.in}, {}, &g);
    tp::Tensor b = tp::randn({d.out}, {}, &g);
    CHECK(tp::linear(x, w, b).to_vector() == (tp::linear(x, w) + b).to_vector());
  }
}

TEST_CASE("a batched product over an empty batch is an empty result, not a kernel error",
          "[linear_algebra]") {
  tp::Tensor a = tp::zeros({0, 4, 5}).requires_grad_(true), b = tp::zeros({0, 5, 3});
  tp::Tensor out = tp::matmul(a, b);
  CHECK(out.shape() == tp::Shape{0, 4, 3});
  tp::sum(out).backward();
  CHECK(a.grad().shape() == a.shape());
}
