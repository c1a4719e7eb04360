// Tests for microbatch.h: split and merge round trips, uneven splits, errors.
#include <catch2/catch.hpp>

#include "stages/microbatch.h"
#include "tensors/tensors.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

TEST_CASE("split along dim 0 then merge round-trips exactly", "[microbatch]") {
  tp::Tensor x = tp::randn({8, 3});
  auto mbs = pp::split_into_microbatches({x}, 4);
  REQUIRE(mbs.size() == 4);
  CHECK(mbs[1][0].shape() == tp::Shape{2, 3});
  std::vector<tp::Tensor> parts;
  for (auto& mb : mbs) parts.push_back(mb[0]);
  CHECK(pp::merge_chunks(parts).to_vector() == x.to_vector());
}

TEST_CASE("an indivisible batch is a clear error unless uneven splits are allowed",
          "[microbatch]") {
  tp::Tensor x = tp::randn({10, 2});
  CHECK_THROWS_WITH(pp::split_into_microbatches({x}, 4), Catch::Contains("not divisible"));
  auto mbs = pp::split_into_microbatches({x}, 4, {}, true);
  CHECK(mbs[0][0].shape()[0] == 3);
  CHECK(mbs[3][0].shape()[0] == 2);
}
