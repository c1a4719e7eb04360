// Tests for microbatch.h: split and merge round trips (even and uneven, several dims), kwargs,
// replicated and non-tensor inputs, reducers, errors.
#include <catch2/catch.hpp>

#include "tensorplay/pipelining/microbatch.h"
#include "tensorplay/tensor.h"

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

TEST_CASE("split_args_kwargs_into_chunks then merge_chunks round-trips", "[microbatch]") {
  tp::manual_seed(60);
  for (int n : {1, 2, 3, 4, 7}) {
    for (int64_t batch : {7, 8, 12}) {
      if (batch < n) continue;
      INFO("n " << n << ", batch " << batch);
      tp::Tensor x0 = tp::randn({batch, 3}), x1 = tp::randn({2, batch, 5}), x2 = tp::randn({batch});
      std::vector<tp::Tensor> args = {x0, x1};
      tp::nn::TensorDict kwargs = {{"a", x2}, {"b", x0}};
      auto [arg_chunks, kwarg_chunks] = pp::split_args_kwargs_into_chunks(
          args, kwargs, n, {pp::TensorChunkSpec{0}, pp::TensorChunkSpec{1}});
      REQUIRE(arg_chunks.size() == static_cast<size_t>(n));
      REQUIRE(kwarg_chunks.size() == static_cast<size_t>(n));
      // As torch.tensor_split: the first batch % n chunks are one longer.
      for (int mb = 0; mb < n; ++mb) {
        int64_t len = batch / n + (mb < batch % n ? 1 : 0);
        CHECK(arg_chunks[mb][0].shape() == tp::Shape{len, 3});
        CHECK(arg_chunks[mb][1].shape() == tp::Shape{2, len, 5});
        CHECK(kwarg_chunks[mb].at("a").shape() == tp::Shape{len});
      }
      auto merged = pp::merge_chunks(arg_chunks, {pp::TensorChunkSpec{0}, pp::TensorChunkSpec{1}});
      CHECK(merged[0].to_vector() == x0.to_vector());
      CHECK(merged[1].shape() == x1.shape());
      CHECK(merged[1].to_vector() == x1.to_vector());
      auto merged_kwargs = pp::merge_chunks(kwarg_chunks);
      CHECK(merged_kwargs.at("a").to_vector() == x2.to_vector());
      CHECK(merged_kwargs.at("b").to_vector() == x0.to_vector());
    }
  }
}

TEST_CASE("replicated inputs and non-tensor values go whole into every microbatch",
          "[microbatch]") {
  tp::Tensor x = tp::randn({6, 2}), mask = tp::randn({3, 3});
  pp::Args args = {x, mask, int64_t{5}, std::string("mode")};
  pp::Kwargs kwargs = {{"scale", 0.5}, {"flag", true}, {"y", tp::randn({2, 6})}};
  auto [arg_chunks, kwarg_chunks] = pp::split_args_kwargs_into_chunks(
      args, kwargs, 3, {pp::TensorChunkSpec{0}, pp::Replicate{}, pp::Replicate{}, pp::Replicate{}},
      {{"y", pp::TensorChunkSpec{-1}}});
  REQUIRE(arg_chunks.size() == 3);
  for (int mb = 0; mb < 3; ++mb) {
    CHECK(std::get<tp::Tensor>(arg_chunks[mb][0]).shape() == tp::Shape{2, 2});
    CHECK(std::get<tp::Tensor>(arg_chunks[mb][1]).is_same(mask));
    CHECK(std::get<int64_t>(arg_chunks[mb][2]) == 5);
    CHECK(std::get<std::string>(arg_chunks[mb][3]) == "mode");
    CHECK(std::get<double>(kwarg_chunks[mb].at("scale")) == 0.5);
    CHECK(std::get<bool>(kwarg_chunks[mb].at("flag")));
    CHECK(std::get<tp::Tensor>(kwarg_chunks[mb].at("y")).shape() == tp::Shape{2, 2});
  }
  // Non-tensors replicate without a spec; splitting one is an error.
  CHECK_NOTHROW(pp::split_args_kwargs_into_chunks(args, {}, 2));
  CHECK_THROWS_WITH(pp::split_args_kwargs_into_chunks(args, {}, 2,
                                                      {pp::TensorChunkSpec{0}, pp::Replicate{},
                                                       pp::TensorChunkSpec{0}, pp::Replicate{}}),
                    Catch::Contains("input 2 is not a tensor"));
  CHECK_THROWS_WITH(pp::split_args_kwargs_into_chunks(args, {}, 2, {pp::Replicate{}}),
                    Catch::Contains("1 chunk specs for 4"));
  CHECK_THROWS_WITH(
      pp::split_args_kwargs_into_chunks(args, kwargs, 2, {}, {{"z", pp::Replicate{}}}),
      Catch::Contains("'z'"));
  CHECK_THROWS_WITH(pp::split_args_kwargs_into_chunks(args, {}, 7),
                    Catch::Contains("fewer than the 7 microbatches"));
}

TEST_CASE("merge_chunks with a reducer sums losses", "[microbatch]") {
  std::vector<tp::Tensor> losses = {tp::scalar_tensor(1.5f), tp::scalar_tensor(2.0f),
                                    tp::scalar_tensor(-0.5f)};
  CHECK(pp::merge_chunks(losses, pp::sum_reducer()).item() == 3.0f);
  CHECK(pp::merge_chunks(losses, pp::Replicate{}).item() == 1.5f);
  CHECK_THROWS_WITH(pp::merge_chunks(std::vector<tp::Tensor>{}, pp::sum_reducer()),
                    Catch::Contains("no chunks"));
}

TEST_CASE("microbatch weights are each chunk's share of the batch", "[microbatch]") {
  tp::Tensor x = tp::randn({10, 2});
  auto mbs = pp::split_into_microbatches({x}, 4, {}, true);
  std::vector<tp::Tensor> chunks;
  for (auto& mb : mbs) chunks.push_back(mb[0]);
  auto w = pp::microbatch_weights(chunks, pp::TensorChunkSpec{0});
  REQUIRE(w.size() == 4);
  CHECK(w[0] == Approx(0.3f));
  CHECK(w[1] == Approx(0.3f));
  CHECK(w[2] == Approx(0.2f));
  CHECK(w[3] == Approx(0.2f));
  // Even chunks: exactly 1/n (the even step's seed, bit for bit); Replicate: 1/n as well.
  auto even = pp::split_into_microbatches({tp::randn({6, 2})}, 3);
  std::vector<tp::Tensor> even_chunks;
  for (auto& mb : even) even_chunks.push_back(mb[0]);
  for (float v : pp::microbatch_weights(even_chunks, pp::TensorChunkSpec{0}))
    CHECK(v == 1.0f / 3.0f);
  for (float v : pp::microbatch_weights(chunks, pp::Replicate{})) CHECK(v == 0.25f);
  // Along another dim.
  auto cols = pp::split_into_microbatches({tp::randn({2, 5})}, 2, {pp::TensorChunkSpec{1}}, true);
  auto wc = pp::microbatch_weights({cols[0][0], cols[1][0]}, pp::TensorChunkSpec{1});
  CHECK(wc[0] == Approx(0.6f));
  CHECK(wc[1] == Approx(0.4f));
}

TEST_CASE("KeepMicrobatches has no merged tensor", "[microbatch]") {
  CHECK_THROWS_WITH(pp::merge_chunks({tp::randn({2}), tp::randn({2})}, pp::KeepMicrobatches{}),
                    Catch::Contains("KeepMicrobatches"));
}
