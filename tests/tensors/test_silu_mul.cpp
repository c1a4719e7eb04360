// Tests for ops/silu_mul.h: the fused op in the op table (float64 reference, gradients by central
// differences, split backward, bfloat16, NaN and Inf, CUDA against CPU) and its bad inputs.
#include <catch2/catch.hpp>
#include <cmath>

#include "tensors/op_table.h"

namespace {

using namespace optest;
using tp::Shape;
using TV = std::vector<tp::Tensor>;
using VV = std::vector<Values>;

OpCase silu_mul_case(Shape s) {
  OpCase c;
  c.name = "silu_mul " + tp::to_string(s);
  c.inputs = {{s}, {s}};
  c.run = [](const TV& in) { return TV{tp::silu_mul(in[0], in[1])}; };
  c.reference = [](const VV& x) {
    Values y(x[0].size());
    for (size_t i = 0; i < y.size(); ++i)
      y[i] = x[0][i] * (1.0 / (1.0 + std::exp(-x[0][i]))) * x[1][i];
    return VV{y};
  };
  c.out_shapes = {s};
  c.activations = 2;
  return c;
}

// The last case is longer than the CPU kernel's block of sigmoids.
std::vector<OpCase> table() {
  return {silu_mul_case({3, 4}), silu_mul_case({2, 3, 5}), silu_mul_case({1}),
          silu_mul_case({2, 700})};
}

}  // namespace

TEST_CASE("op table: silu_mul on the CPU", "[op_table][silu_mul]") {
  check_table_on_cpu(table(), 4200);
}

TEST_CASE("op table: silu_mul on CUDA matches the CPU", "[op_table][cuda][silu_mul]") {
  check_table_on_cuda(table(), 4200);
}

TEST_CASE("silu_mul equals the composed ops within float32 rounding", "[silu_mul]") {
  tp::manual_seed(4);
  tp::Tensor gate = tp::randn({7, 33}) * 3.0f, up = tp::randn({7, 33});
  auto a = tp::silu_mul(gate, up).to_vector();
  auto b = (gate * tp::sigmoid(gate) * up).to_vector();
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(std::abs(a[i] - b[i]) <= 4e-6f * (1 + std::abs(b[i])));
}

TEST_CASE("silu_mul names what is wrong with its arguments", "[silu_mul]") {
  CHECK_THROWS_WITH(tp::silu_mul(tp::randn({2, 3}), tp::randn({3})),
                    Catch::Contains("gate of shape [2, 3] and up of shape [3] differ"));
  CHECK_THROWS_WITH(tp::silu_mul(tp::Tensor(), tp::randn({3})), Catch::Contains("silu_mul"));
}
