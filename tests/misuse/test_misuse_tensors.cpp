// Misuse of the tensor core: sizes that overflow or make no sense, and NaN or infinite values,
// which must propagate as in PyTorch instead of being hidden.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>

#include "misuse_support.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
using misuse::expect_error;

namespace {
constexpr int64_t kHuge = int64_t{1} << 62;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
}  // namespace

TEST_CASE("misuse: a shape whose element count overflows int64", "[misuse][tensors]") {
  // numel wrapped to 0 here, and slicing the tensor then read out of bounds.
  expect_error<std::invalid_argument>(
      [] {
        tp::zeros({kHuge, 4});
      },
      {"[4611686018427387904, 4]", "int64", "check the sizes"});
}

TEST_CASE("misuse: a shape whose byte count overflows int64", "[misuse][tensors]") {
  expect_error<std::invalid_argument>([] { tp::empty({kHuge}); },
                                      {"bytes", "int64", "check the sizes"});
}

TEST_CASE("misuse: a negative size in a shape", "[misuse][tensors]") {
  expect_error<std::invalid_argument>(
      [] {
        tp::zeros({3, -1});
      },
      {"-1", "dimension 1", "sizes must be >= 0"});
}

TEST_CASE("misuse: a shape too large for memory is a clear error, not bad_alloc",
          "[misuse][tensors]") {
  expect_error<std::runtime_error>([] { tp::empty({int64_t{1} << 60}); },
                                   {"out of memory", "bytes", "cpu", "smaller tensors"});
}

TEST_CASE("misuse: reshape with sizes below -1", "[misuse][tensors]") {
  tp::Tensor x = tp::zeros({6});
  expect_error<std::invalid_argument>(
      [x] {
        x.reshape({-2, -3});
      },
      {"reshape", "-2", "sizes must be >= 0, or -1"});
}

TEST_CASE("misuse: reshape with two -1 sizes", "[misuse][tensors]") {
  tp::Tensor x = tp::zeros({6});
  expect_error<std::invalid_argument>([x] { x.reshape({-1, -1}); }, {"only one size may be -1"});
}

TEST_CASE("misuse: reshape whose -1 cannot be inferred", "[misuse][tensors]") {
  tp::Tensor x = tp::zeros({0, 4});
  expect_error<std::invalid_argument>(
      [x] {
        x.reshape({0, -1});
      },
      {"ambiguous", "give every size explicitly"});
}

TEST_CASE("misuse: reshape to sizes whose product overflows", "[misuse][tensors]") {
  tp::Tensor x = tp::zeros({4});
  expect_error<std::invalid_argument>([x] { x.reshape({kHuge, 4}); }, {"reshape", "overflows"});
  expect_error<std::invalid_argument>([x] { x.reshape({kHuge, 4, -1}); }, {"reshape", "overflows"});
}

TEST_CASE("misuse: slicing past the end", "[misuse][tensors]") {
  tp::Tensor x = tp::zeros({4, 2});
  expect_error<std::invalid_argument>([x] { x.slice0(2, 9); },
                                      {"slice0", "out of range", "[4, 2]"});
}

TEST_CASE("misuse: narrow with a length that overflows start + length", "[misuse][tensors]") {
  tp::Tensor x = tp::zeros({4, 3});
  expect_error<std::invalid_argument>([x] { tp::narrow(x, 1, 1, kMax); },
                                      {"narrow", "out of range"});
  expect_error<std::invalid_argument>([x] { tp::narrow(x, 0, 1, kMax); },
                                      {"narrow", "out of range"});
}

TEST_CASE("misuse: split sizes whose sum overflows", "[misuse][tensors]") {
  tp::Tensor x = tp::zeros({4});
  expect_error<std::invalid_argument>(
      [x] {
        tp::split(x, std::vector<int64_t>{kMax, kMax});
      },
      {"split", "overflows"});
}

TEST_CASE("misuse: split and chunk with huge piece counts do not overflow", "[misuse][tensors]") {
  tp::Tensor x = tp::arange(5);
  // The piece counts, handed back from run_bounded's thread (which makes no Catch2 assertion)
  // through a share that outlives this test if the call hangs.
  auto pieces = std::make_shared<std::pair<size_t, size_t>>();
  std::exception_ptr error = misuse::run_bounded([x, pieces] {
    pieces->first = tp::split(x, kMax).size();
    pieces->second = tp::chunk(x, kMax).size();
  });
  CHECK_FALSE(error);
  CHECK(pieces->first == 1);
  CHECK(pieces->second == 5);
}

TEST_CASE("misuse: arange of a negative count", "[misuse][tensors]") {
  expect_error<std::invalid_argument>([] { tp::arange(-3); }, {"arange", "-3", ">= 0"});
}

TEST_CASE("misuse: relu of NaN is NaN, as in PyTorch", "[misuse][tensors]") {
  // It returned 0, so a NaN input trained on while the losses looked finite.
  tp::Tensor y = tp::relu(tp::from_vector({kNan, -1.0f, 2.0f}, {3}));
  std::vector<float> v = y.to_vector();
  CHECK(std::isnan(v[0]));
  CHECK(v[1] == 0.0f);
  CHECK(v[2] == 2.0f);
}

TEST_CASE("misuse: a NaN input reaches the loss of a model", "[misuse][tensors]") {
  tp::nn::Sequential model(tp::nn::Linear(3, 4), tp::nn::ReLU(), tp::nn::Linear(4, 1));
  tp::Tensor x = tp::from_vector({kNan, 1, 2, 3, 4, 5}, {2, 3});
  tp::Tensor loss = tp::nn::mse_loss(model(x), tp::zeros({2, 1}));
  CHECK(std::isnan(loss.item()));
}

TEST_CASE("misuse: clip_grad_norm of NaN gradients makes them NaN, as in PyTorch",
          "[misuse][tensors]") {
  tp::Tensor p = tp::ones({2}).requires_grad_();
  p.set_grad(tp::from_vector({kNan, 1.0f}, {2}));
  CHECK(std::isnan(tp::optim::clip_grad_norm({p}, 1.0f)));
  CHECK(std::isnan(p.grad().to_vector()[1]));
}

TEST_CASE("misuse: NaN or infinite class ids are rejected, never cast", "[misuse][tensors]") {
  tp::Tensor logits = tp::zeros({2, 3});
  expect_error<std::invalid_argument>(
      [logits] {
        tp::cross_entropy(logits,
                          tp::from_vector({std::numeric_limits<float>::infinity(), 0}, {2}));
      },
      {"cross_entropy", "inf", "not a class id"});
  expect_error<std::invalid_argument>(
      [] {
        tp::embedding(tp::from_vector({kNan}, {1}), tp::zeros({4, 2}));
      },
      {"embedding", "nan", "outside the vocabulary"});
}
