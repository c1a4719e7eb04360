// Tests for ops/rms_norm.h: the fused op in the op table (float64 reference, gradients by central
// differences, split backward, bfloat16, NaN and Inf, CUDA against CPU) and its bad inputs.
#include <catch2/catch.hpp>
#include <cmath>

#include "tensors/op_table.h"

namespace {

using namespace optest;
using tp::Shape;
using TV = std::vector<tp::Tensor>;
using VV = std::vector<Values>;

OpCase rms_norm_case(Shape s, bool weight, float eps) {
  const int64_t cols = s.back(), rows = count(s) / cols;
  OpCase c;
  c.name =
      "rms_norm " + tp::to_string(s) + (weight ? " weight" : "") + " eps " + std::to_string(eps);
  c.inputs = {{s}};
  if (weight) c.inputs.push_back({{cols}});
  c.run = [=](const TV& in) {
    return TV{tp::rms_norm(in[0], cols, weight ? in[1] : tp::Tensor(), eps)};
  };
  c.reference = [=](const VV& x) {
    Values y(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
      double squares = 0;
      for (int64_t j = 0; j < cols; ++j) squares += x[0][r * cols + j] * x[0][r * cols + j];
      const double inv = 1.0 / std::sqrt(squares / cols + eps);
      for (int64_t j = 0; j < cols; ++j)
        y[r * cols + j] = x[0][r * cols + j] * inv * (weight ? x[1][j] : 1.0);
    }
    return VV{y};
  };
  c.out_shapes = {s};
  return c;
}

std::vector<OpCase> table() {
  return {rms_norm_case({2, 3, 8}, true, 1e-6f), rms_norm_case({4, 6}, false, 1e-5f),
          rms_norm_case({1, 5}, true, 0.0f), rms_norm_case({3, 1, 4}, true, 1e-6f)};
}

}  // namespace

TEST_CASE("op table: rms_norm on the CPU", "[op_table][rms_norm]") {
  check_table_on_cpu(table(), 4100);
}

TEST_CASE("op table: rms_norm on CUDA matches the CPU", "[op_table][cuda][rms_norm]") {
  check_table_on_cuda(table(), 4100);
}

TEST_CASE("rms_norm equals the composed ops within float32 rounding", "[rms_norm]") {
  tp::manual_seed(3);
  tp::Tensor x = tp::randn({5, 32}) * 4.0f, w = tp::randn({32});
  tp::Tensor fused = tp::rms_norm(x, 32, w, 1e-6f);
  tp::Tensor composed = x / tp::sqrt(tp::mean(tp::square(x), -1, true) + 1e-6f) * w;
  auto a = fused.to_vector(), b = composed.to_vector();
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(std::abs(a[i] - b[i]) <= 4e-6f * (1 + std::abs(b[i])));
}

TEST_CASE("rms_norm names what is wrong with its arguments", "[rms_norm]") {
  tp::Tensor x = tp::randn({2, 4});
  CHECK_THROWS_WITH(tp::rms_norm(x, 3), Catch::Contains("does not end in the normalized size 3"));
  CHECK_THROWS_WITH(tp::rms_norm(x, 4, tp::randn({5})),
                    Catch::Contains("weight of shape [5] does not match normalized size 4"));
  CHECK_THROWS_WITH(tp::rms_norm(x, 4, tp::Tensor(), -1.0f), Catch::Contains("eps must be >= 0"));
  CHECK_THROWS_WITH(tp::rms_norm(tp::Tensor(), 4), Catch::Contains("rms_norm"));
}
