// Non-finite inputs (NaN, +-Inf) against PyTorch's own results: the op table's references follow
// PyTorch's rules; these anchor the rules to PyTorch 2.15's actual outputs on the CPU
// (tests/tensors/nonfinite_pytorch.py prints them), to 4 decimals.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

void check_like_pytorch(const std::string& op, const tp::Tensor& got,
                        const std::vector<float>& pytorch) {
  std::vector<float> v = got.to_vector();
  REQUIRE(v.size() == pytorch.size());
  for (size_t i = 0; i < v.size(); ++i) {
    INFO(op << " element " << i << ": got " << v[i] << ", PyTorch gives " << pytorch[i]);
    if (std::isnan(pytorch[i])) {
      CHECK(std::isnan(v[i]));
    } else if (std::isinf(pytorch[i])) {
      CHECK(v[i] == pytorch[i]);
    } else {
      CHECK(std::abs(v[i] - pytorch[i]) <= 1e-4f);
    }
  }
}

}  // namespace

TEST_CASE("non-finite inputs give PyTorch's results", "[op_table][nonfinite]") {
  const tp::Tensor x = tp::from_vector({kNan, kInf, -kInf, 1.0f, -2.0f, 0.0f}, {6});
  check_like_pytorch("relu", tp::relu(x), {kNan, kInf, 0, 1, 0, 0});
  check_like_pytorch("gelu", tp::gelu(x), {kNan, kInf, kNan, 0.8412f, -0.0454f, 0});
  check_like_pytorch("tanh", tp::tanh(x), {kNan, 1, -1, 0.7616f, -0.9640f, 0});
  check_like_pytorch("exp", tp::exp(x), {kNan, kInf, 0, 2.7183f, 0.1353f, 1});
  check_like_pytorch("log", tp::log(x), {kNan, kInf, kNan, 0, kNan, -kInf});
  check_like_pytorch("sqrt", tp::sqrt(x), {kNan, kInf, kNan, 1, kNan, 0});
  check_like_pytorch("sigmoid", tp::sigmoid(x), {kNan, 1, 0, 0.7311f, 0.1192f, 0.5f});
  check_like_pytorch("square", tp::square(x), {kNan, kInf, kInf, 1, 4, 0});
  check_like_pytorch("sum", tp::sum(x), {kNan});
  check_like_pytorch("sum of +Inf and -Inf", tp::sum(tp::from_vector({kInf, -kInf}, {2})), {kNan});
  check_like_pytorch("mean", tp::mean(tp::from_vector({kInf, 1}, {2})), {kInf});
  {
    tp::Tensor leaf = x.detach().requires_grad_();
    tp::relu(leaf).backward(tp::ones({6}));
    check_like_pytorch("relu gradient", leaf.grad(), {1, 1, 0, 1, 0, 0});
  }
  const tp::Tensor rows =
      tp::from_vector({kNan, 1, 2, kInf, 1, 2, -kInf, 1, 2, -kInf, -kInf, -kInf, 0, 1, 2}, {5, 3});
  check_like_pytorch("softmax", tp::softmax(rows, -1),
                     {kNan, kNan, kNan, kNan, kNan, kNan, 0, 0.2689f, 0.7311f, kNan, kNan, kNan,
                      0.0900f, 0.2447f, 0.6652f});
  check_like_pytorch("log_softmax", tp::log_softmax(rows, -1),
                     {kNan, kNan, kNan, kNan, kNan, kNan, -kInf, -1.3133f, -0.3133f, kNan, kNan,
                      kNan, -2.4076f, -1.4076f, -0.4076f});
  check_like_pytorch("layer_norm", tp::layer_norm(tp::narrow(rows, 0, 0, 3), 3),
                     {kNan, kNan, kNan, kNan, kNan, kNan, kNan, kNan, kNan});
  const tp::Tensor logits = tp::from_vector({kNan, 1, 2, 0, 1, 2}, {2, 3});
  check_like_pytorch(
      "cross_entropy",
      tp::cross_entropy(logits, tp::from_vector({1, 0}, {2}), -100, tp::Reduction::None),
      {kNan, 2.4076f});
  check_like_pytorch(
      "cross_entropy, NaN row ignored",
      tp::cross_entropy(logits, tp::from_vector({-100, 0}, {2}), -100, tp::Reduction::None),
      {0, 2.4076f});
  check_like_pytorch("cross_entropy mean, NaN row ignored",
                     tp::cross_entropy(logits, tp::from_vector({-100, 0}, {2})), {2.4076f});
  check_like_pytorch("cross_entropy of infinite logits",
                     tp::cross_entropy(tp::from_vector({kInf, 1, 2, -kInf, 1, 2}, {2, 3}),
                                       tp::from_vector({1, 1}, {2}), -100, tp::Reduction::None),
                     {kNan, 1.3133f});
  check_like_pytorch("cross_entropy, target logit -Inf",
                     tp::cross_entropy(tp::from_vector({-kInf, 1, 2}, {1, 3}),
                                       tp::from_vector({0}, {1}), -100, tp::Reduction::None),
                     {kInf});
  check_like_pytorch("mse_loss",
                     tp::mse_loss(tp::from_vector({kInf, 1}, {2}), tp::from_vector({kInf, 1}, {2}),
                                  tp::Reduction::None),
                     {kNan, 0});
  check_like_pytorch(
      "matmul, Inf times 0",
      tp::matmul(tp::from_vector({kInf, 1}, {1, 2}), tp::from_vector({0, 1}, {2, 1})), {kNan});
  {
    tp::Generator gen(7);
    std::vector<float> dropped = tp::dropout(tp::full({64}, kNan), 0.5f, true, &gen).to_vector();
    INFO("dropout keeps NaN in dropped elements too (they are multiplied by 0)");
    CHECK(std::all_of(dropped.begin(), dropped.end(), [](float v) { return std::isnan(v); }));
  }
}

TEST_CASE("clip_grad_norm with a NaN or infinite norm clips as PyTorch does",
          "[op_table][nonfinite]") {
  tp::Tensor p = tp::ones({3}).requires_grad_();
  p.set_grad(tp::from_vector({kNan, 1, 2}, {3}));
  CHECK(std::isnan(tp::optim::clip_grad_norm({p}, 1.0f)));
  check_like_pytorch("gradients after a NaN norm", p.grad(), {kNan, kNan, kNan});
  p.set_grad(tp::from_vector({kInf, 1, 2}, {3}));
  CHECK(std::isinf(tp::optim::clip_grad_norm({p}, 1.0f)));
  check_like_pytorch("gradients after an infinite norm", p.grad(), {kNan, 0, 0});
}
