// Tests for tensor_parallel/functional.h: each autograd-aware collective over 2 ranks (threads of
// one process, join_job), its forward and its backward (the transpose), on known values.
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "in_process_job.h"
#include "tensorplay/distributed/tensor_parallel/functional.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace tpar = tensorplay::distributed::tensor_parallel;

namespace {

using Collective =
    std::function<tp::Tensor(const tp::Tensor&, const tp::distributed::ProcessGroup&)>;

struct Seen {
  std::vector<float> forward, backward;
  tp::Shape shape;
};

// On rank r: x = [[r+1, r+2], [r+3, r+4]] (leaf), y = op(x), backward of sum(y * w) with
// w = 1, 2, 3, ... (the same on both ranks); what y and x's gradient were.
std::vector<Seen> run_op(const Collective& op) {
  std::vector<Seen> seen(2);
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(20), [&](auto& world) {
    const int r = world.rank();
    const float b = static_cast<float>(r);
    tp::Tensor x = tp::from_vector({b + 1, b + 2, b + 3, b + 4}, {2, 2}).set_requires_grad(true);
    tp::Tensor y = op(x, world);
    std::vector<float> w(static_cast<size_t>(y.numel()));
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i + 1);
    tp::sum(y * tp::from_vector(w, y.shape())).backward();
    seen[r] = {y.to_vector(), x.grad().to_vector(), y.shape()};
  });
  for (const auto& o : outcomes) REQUIRE(o.error == "");
  return seen;
}

}  // namespace

TEST_CASE("copy_to_parallel_region: identity forward, all-reduce backward", "[tensor_parallel]") {
  auto s = run_op([](auto& x, auto& g) { return tpar::copy_to_parallel_region(x, g); });
  CHECK(s[0].forward == std::vector<float>{1, 2, 3, 4});
  CHECK(s[1].forward == std::vector<float>{2, 3, 4, 5});
  for (const auto& r : s) CHECK(r.backward == std::vector<float>{2, 4, 6, 8});
}

TEST_CASE("reduce_from_parallel_region: all-reduce forward, identity backward",
          "[tensor_parallel]") {
  auto s = run_op([](auto& x, auto& g) { return tpar::reduce_from_parallel_region(x, g); });
  for (const auto& r : s) {
    CHECK(r.forward == std::vector<float>{3, 5, 7, 9});
    CHECK(r.backward == std::vector<float>{1, 2, 3, 4});
  }
}

TEST_CASE("gather_from_parallel_region: all-gather forward, own chunk backward",
          "[tensor_parallel]") {
  auto s = run_op([](auto& x, auto& g) { return tpar::gather_from_parallel_region(x, 1, g); });
  for (const auto& r : s) {
    CHECK(r.shape == tp::Shape{2, 4});
    CHECK(r.forward == std::vector<float>{1, 2, 2, 3, 3, 4, 4, 5});
  }
  CHECK(s[0].backward == std::vector<float>{1, 2, 5, 6});
  CHECK(s[1].backward == std::vector<float>{3, 4, 7, 8});
}

TEST_CASE("scatter_to_parallel_region: own chunk forward, all-gather backward",
          "[tensor_parallel]") {
  auto s = run_op([](auto& x, auto& g) { return tpar::scatter_to_parallel_region(x, 0, g); });
  CHECK(s[0].forward == std::vector<float>{1, 2});
  CHECK(s[1].forward == std::vector<float>{4, 5});
  // Each rank's gradient of its chunk is 1, 2; gathered along dim 0.
  for (const auto& r : s) CHECK(r.backward == std::vector<float>{1, 2, 1, 2});
}

TEST_CASE("all_gather: all-gather forward, reduce-scatter backward", "[tensor_parallel]") {
  auto s = run_op([](auto& x, auto& g) { return tpar::all_gather(x, 0, g); });
  for (const auto& r : s) {
    CHECK(r.shape == tp::Shape{4, 2});
    CHECK(r.forward == std::vector<float>{1, 2, 3, 4, 2, 3, 4, 5});
  }
  // The gathered gradient (1..8 on both ranks) summed (2..16), each rank keeping its rows.
  CHECK(s[0].backward == std::vector<float>{2, 4, 6, 8});
  CHECK(s[1].backward == std::vector<float>{10, 12, 14, 16});
}

TEST_CASE("reduce_scatter: reduce-scatter forward, all-gather backward", "[tensor_parallel]") {
  auto s = run_op([](auto& x, auto& g) { return tpar::reduce_scatter(x, 0, g); });
  CHECK(s[0].forward == std::vector<float>{3, 5});
  CHECK(s[1].forward == std::vector<float>{7, 9});
  for (const auto& r : s) CHECK(r.backward == std::vector<float>{1, 2, 1, 2});
}

TEST_CASE("a chunk that does not split evenly is a clear error", "[tensor_parallel]") {
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(20), [](auto& world) {
    tpar::scatter_to_parallel_region(tp::zeros({3}), 0, world);
  });
  for (const auto& o : outcomes)
    CHECK_THAT(o.error, Catch::Contains("does not split evenly over 2 ranks"));
}

TEST_CASE("collective_figures counts this thread's collectives", "[tensor_parallel]") {
  std::vector<tpar::CollectiveFigures> figures(2);
  auto outcomes = tp::testing::run_ranks(2, {0, 1}, std::chrono::seconds(20), [&](auto& world) {
    tpar::reset_collective_figures();
    tp::Tensor x = tp::ones({4, 8}).set_requires_grad(true);
    tp::sum(tpar::copy_to_parallel_region(x, world)).backward();  // one all-reduce, backward
    tpar::all_gather(x.detach(), 0, world);                       // one all-gather
    figures[world.rank()] = tpar::collective_figures();
  });
  for (const auto& o : outcomes) REQUIRE(o.error == "");
  for (const auto& f : figures) {
    CHECK(f.calls == 2);
    CHECK(f.bytes == 2 * 4 * 8 * 4);
    CHECK(f.seconds > 0.0);
  }
}
