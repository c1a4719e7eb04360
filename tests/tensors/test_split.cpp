// Tests for ops/split.h beyond the op table: piece counts like PyTorch's, views on dim 0, errors.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;

namespace {
std::vector<int64_t> sizes(const std::vector<tp::Tensor>& pieces, int64_t dim) {
  std::vector<int64_t> s;
  for (const auto& p : pieces) s.push_back(p.size(dim));
  return s;
}
}  // namespace

TEST_CASE("split, chunk and tensor_split cut like PyTorch", "[split]") {
  tp::Tensor x = tp::arange(10).reshape({10, 1});
  CHECK(sizes(tp::split(x, 4), 0) == std::vector<int64_t>{4, 4, 2});
  CHECK(sizes(tp::chunk(x, 4), 0) == std::vector<int64_t>{3, 3, 3, 1});
  CHECK(sizes(tp::chunk(tp::ones({6}), 4), 0) == std::vector<int64_t>{2, 2, 2});  // fewer chunks
  CHECK(sizes(tp::tensor_split(x, 4), 0) == std::vector<int64_t>{3, 3, 2, 2});
  CHECK(sizes(tp::tensor_split(x, 12), 0).size() == 12);  // empty pieces at the end
  CHECK(sizes(tp::tensor_split(x, std::vector<int64_t>{2, 20, 5}), 0) ==
        std::vector<int64_t>{2, 8, 0, 0});
  CHECK(tp::split(x, 4)[1].to_vector() == std::vector<float>{4, 5, 6, 7});
}

TEST_CASE("pieces along dim 0 share storage with the input", "[split]") {
  tp::Tensor x = tp::zeros({4, 2});
  auto pieces = tp::split(x, 2);
  pieces[1].fill_(1.0f);
  CHECK(x.to_vector() == std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1});
}

TEST_CASE("split errors name the problem", "[split]") {
  tp::Tensor x = tp::ones({4, 6});
  CHECK_THROWS_WITH(tp::split(x, 0, 1), Catch::Contains("split_size must be positive"));
  CHECK_THROWS_WITH(tp::split(x, std::vector<int64_t>{2, 3}, 1), Catch::Contains("add up to 5"));
  CHECK_THROWS_WITH(tp::chunk(x, 0), Catch::Contains("chunks must be positive"));
  CHECK_THROWS_WITH(tp::tensor_split(x, 0, 1), Catch::Contains("sections must be positive"));
  CHECK_THROWS_WITH(tp::split(x, 2, 2), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(tp::split(tp::scalar_tensor(1), 1), Catch::Contains("scalar"));
}
