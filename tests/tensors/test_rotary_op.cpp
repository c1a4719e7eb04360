// Tests for ops/rotary.h: the fused op in the op table (float64 reference, gradients by central
// differences, split backward, bfloat16, NaN and Inf, CUDA against CPU) and its bad inputs.
#include <catch2/catch.hpp>

#include "tensors/op_table.h"

namespace {

using namespace optest;
using tp::Shape;
using TV = std::vector<tp::Tensor>;
using VV = std::vector<Values>;

// x [..., T, D] (or, with time_dim 1, [B, T, ..., D]) with arbitrary tables cos, sin [T, D]
// (constants: no gradient).
OpCase rotary_case(Shape s, int64_t time_dim = -2) {
  const int64_t t_dim = time_dim < 0 ? time_dim + static_cast<int64_t>(s.size()) : time_dim;
  const int64_t dim = s.back(), time = s[t_dim], rows = count(s) / dim, half = dim / 2;
  const int64_t inner = rows / count(Shape(s.begin(), s.begin() + t_dim + 1));  // rows a position
  OpCase c;
  c.name = "rotary_embedding " + tp::to_string(s) + " positions along " + std::to_string(t_dim);
  c.inputs = {{s}, {{time, dim}, Fill::Normal, false}, {{time, dim}, Fill::Normal, false}};
  c.run = [time_dim](const TV& in) {
    return TV{tp::rotary_embedding(in[0], in[1], in[2], time_dim)};
  };
  c.reference = [=](const VV& x) {
    Values y(rows * dim);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t t = r / inner % time;
      for (int64_t j = 0; j < dim; ++j) {
        const double rotated = j < half ? -x[0][r * dim + j + half] : x[0][r * dim + j - half];
        y[r * dim + j] = x[0][r * dim + j] * x[1][t * dim + j] + rotated * x[2][t * dim + j];
      }
    }
    return VV{y};
  };
  c.out_shapes = {s};
  return c;
}

std::vector<OpCase> table() {
  return {rotary_case({2, 3, 5, 4}), rotary_case({3, 6}),          rotary_case({1, 2, 2, 8}),
          rotary_case({1, 2}),       rotary_case({2, 5, 3, 4}, 1), rotary_case({1, 4, 2, 2, 6}, 1)};
}

}  // namespace

TEST_CASE("op table: rotary_embedding on the CPU", "[op_table][rotary]") {
  check_table_on_cpu(table(), 4300);
}

TEST_CASE("op table: rotary_embedding on CUDA matches the CPU", "[op_table][cuda][rotary]") {
  check_table_on_cuda(table(), 4300);
}

TEST_CASE("rotary_embedding names what is wrong with its arguments", "[rotary]") {
  tp::Tensor table = tp::randn({3, 4});
  CHECK_THROWS_WITH(
      tp::rotary_embedding(tp::randn({2, 3, 5}), tp::randn({3, 5}), tp::randn({3, 5})),
      Catch::Contains("D even"));
  CHECK_THROWS_WITH(tp::rotary_embedding(tp::randn({2, 3, 4}), tp::randn({4, 4}), table),
                    Catch::Contains("must both be [3, 4]"));
  CHECK_THROWS_WITH(tp::rotary_embedding(tp::randn({2, 3, 4}), table, table, 2),
                    Catch::Contains("position dimension 2 must come before the last"));
  // Tokens first: the positions are dimension 1, so the tables must have its 5 rows.
  CHECK_THROWS_WITH(tp::rotary_embedding(tp::randn({2, 5, 3, 4}), table, table, 1),
                    Catch::Contains("must both be [5, 4]"));
  tp::Tensor learned = tp::randn({3, 4}).requires_grad_();
  CHECK_THROWS_WITH(tp::rotary_embedding(tp::randn({2, 3, 4}), learned, table),
                    Catch::Contains("must not require a gradient"));
}
