// Tests for split_policy.h: parameter-count and cost balancing, cost estimates, bad policies.
#include "models.h"
#include "tensorplay/pipelining/tracer.h"

using namespace stages_test;

TEST_CASE("split_by_parameter_count cuts an even stack at layer boundaries", "[policy]") {
  tp::manual_seed(30);
  MlpStack model(8, 4);
  tp::Tensor x = tp::randn({2, 8}), target = tp::randn({2, 8});
  auto pipe = pp::pipeline(model, {x}, {.split_policy = pp::split_by_parameter_count(4)});
  REQUIRE(pipe.num_stages() == 4);
  for (int s = 0; s < 4; ++s) {
    auto names = pipe.stage_module(s).named_parameters();
    REQUIRE(names.size() == 2);
    CHECK(names[0].first == "layers." + std::to_string(s) + ".net.0.weight");
    // The cut falls between blocks (after the ReLU): one value crosses.
    if (s < 3) CHECK(pipe.boundary(s).size() == 1);
  }
  CHECK(pipe.forward({x})[0].to_vector() == model(x).to_vector());
  check_grads(stage_grads(pipe, {x}, {}, target), reference_grads(model, {x}, {}, target));
}

TEST_CASE("split_by_cost balances estimated FLOPs", "[policy]") {
  tp::manual_seed(31);
  // Block widths 4, 4, 4, 16: the last block costs about as much as the others together.
  struct Uneven : tp::nn::Module {
    Uneven() {
      a = register_module("a", tp::nn::Linear(4, 4));
      b = register_module("b", tp::nn::Linear(4, 4));
      c = register_module("c", tp::nn::Linear(4, 16));
      d = register_module("d", tp::nn::Linear(16, 16));
    }
    tp::Tensor forward(const tp::Tensor& x) override { return d(c(b(a(x)))); }
    tp::nn::Linear a{nullptr}, b{nullptr}, c{nullptr}, d{nullptr};
  } model;
  tp::Tensor x = tp::randn({8, 4});
  pp::Graph g = pp::trace(model, {x});
  CHECK(pp::estimate_flops(g, 0) == 2.0 * 8 * 4 * 4);
  CHECK(pp::estimate_flops(g, 3) == 2.0 * 8 * 16 * 16);
  auto pipe = pp::pipeline(model, {x}, {.split_policy = pp::split_by_cost(2)});
  REQUIRE(pipe.num_stages() == 2);
  CHECK(pipe.cuts() == std::vector<int>{3});  // a, b, c | d
  auto by_params = pp::split_by_parameter_count(2)(g);
  CHECK(by_params == std::vector<int>{3});
}

TEST_CASE("balanced_cuts keeps every stage non-empty and checks its input", "[policy]") {
  tp::manual_seed(32);
  MlpStack model(4, 2);
  pp::Graph g = pp::trace(model, {tp::randn({2, 4})});
  // All the weight on the first node: later stages still get one node each.
  std::vector<double> w(g.nodes.size(), 0.0);
  w[0] = 1.0;
  auto cuts = pp::balanced_cuts(g, w, 4);
  REQUIRE(cuts.size() == 3);
  CHECK(cuts.front() >= 1);
  CHECK(cuts.back() <= static_cast<int>(g.nodes.size()) - 1);
  CHECK(std::is_sorted(cuts.begin(), cuts.end()));
  CHECK_THROWS_WITH(pp::balanced_cuts(g, w, 10), Catch::Contains("non-empty stages"));
  CHECK_THROWS_WITH(pp::balanced_cuts(g, w, 0), Catch::Contains("at least 1"));
}

TEST_CASE("a custom policy's bad cuts are errors", "[policy]") {
  tp::manual_seed(33);
  MlpStack model(4, 2);
  tp::Tensor x = tp::randn({2, 4});
  auto descending = [](const pp::Graph&) { return std::vector<int>{3, 1}; };
  CHECK_THROWS_WITH(pp::pipeline(model, {x}, {.split_policy = descending}),
                    Catch::Contains("do not ascend"));
  auto at_end = [](const pp::Graph& g) {
    return std::vector<int>{static_cast<int>(g.nodes.size())};
  };
  CHECK_THROWS_WITH(pp::pipeline(model, {x}, {.split_policy = at_end}),
                    Catch::Contains("last stage empty"));
  auto by_hand = [](const pp::Graph& g) {
    return std::vector<int>{g.module_ranges.at("layers.1").first};
  };
  CHECK(pp::pipeline(model, {x}, {.split_policy = by_hand}).num_stages() == 2);
}
