// Tests for pipeline_stage.h: per-microbatch forward/backward against the unsplit module.
#include <catch2/catch.hpp>
#include <thread>

#include "stages/pipeline_stage.h"
#include "tensors/cpu_threads.h"
#include "tensors/tensors.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

namespace {
std::shared_ptr<tp::nn::Module> block(int64_t dim) {
  return tp::nn::Sequential(tp::nn::Linear(dim, dim), tp::nn::ReLU()).ptr();
}
}  // namespace

TEST_CASE("two manual stages reproduce the unsplit gradients", "[stage]") {
  tp::manual_seed(1);
  auto m0 = block(8), m1 = block(8);
  pp::PipelineStage s0(m0, 0, 2, tp::cpu(), {tp::zeros({4, 8})});
  pp::PipelineStage s1(m1, 1, 2, tp::cpu(), {tp::zeros({4, 8})});
  CHECK(s1.output_meta()[0].shape == tp::Shape{4, 8});
  tp::Tensor x = tp::randn({4, 8}), y = tp::randn({4, 8});

  auto h = s0.forward(0, {x});
  auto out = s1.forward(0, h);
  tp::Tensor loss = s1.compute_loss(0, y, tp::nn::mse_loss);
  auto g1 = s1.backward(0, {}, 1.0f);
  REQUIRE(g1.size() == 1);
  auto g0 = s0.backward(0, g1);
  CHECK(g0.empty());
  CHECK(s0.stashed_microbatches() == 0);

  // Reference: the same modules chained, one backward.
  std::vector<tp::Tensor> split_grads;
  for (auto& p : m0->parameters()) split_grads.push_back(p.grad());
  for (auto& p : m1->parameters()) split_grads.push_back(p.grad());
  m0->zero_grad();
  m1->zero_grad();
  tp::Tensor ref_loss = tp::nn::mse_loss((*m1)((*m0)(x)), y);
  ref_loss.backward();
  CHECK(ref_loss.item() == loss.item());
  size_t i = 0;
  for (auto* m : {m0.get(), m1.get()})
    for (auto& p : m->parameters()) CHECK(p.grad().to_vector() == split_grads[i++].to_vector());
}

TEST_CASE("split backward on a stage equals its full backward", "[stage]") {
  tp::manual_seed(2);
  auto a = block(6), b = block(6);
  b->find_tensor("0.weight").copy_(a->find_tensor("0.weight"));
  b->find_tensor("0.bias").copy_(a->find_tensor("0.bias"));
  pp::PipelineStage full(a, 1, 3, tp::cpu(), {tp::zeros({3, 6})});
  pp::PipelineStage split(b, 1, 3, tp::cpu(), {tp::zeros({3, 6})});
  tp::Tensor x = tp::randn({3, 6}), g = tp::randn({3, 6});
  full.forward(0, {x});
  split.forward(0, {x});
  auto gf = full.backward(0, {g});
  auto gs = split.backward_input(0, {g});
  CHECK_FALSE(b->find_tensor("0.weight").grad().defined());
  split.backward_weight(0);
  CHECK(gf[0].to_vector() == gs[0].to_vector());
  CHECK(a->find_tensor("0.weight").grad().to_vector() ==
        b->find_tensor("0.weight").grad().to_vector());
}

TEST_CASE("a later stage sends back the gradient of a bfloat16 activation", "[stage]") {
  tp::manual_seed(3);
  auto m = block(4);
  m->to(tp::DType::BFloat16);
  tp::Tensor x = tp::randn({2, 4}).to(tp::DType::BFloat16);
  pp::PipelineStage s(m, 1, 3, tp::cpu(), {x});
  CHECK(s.input_meta()[0].dtype == tp::DType::BFloat16);
  s.forward(0, {x});
  auto g = s.backward(0, {tp::ones({2, 4}).to(tp::DType::BFloat16)});
  REQUIRE(g.size() == 1);
  REQUIRE(g[0].defined());
  CHECK(g[0].dtype() == tp::DType::BFloat16);
  CHECK(m->find_tensor("0.weight").grad().dtype() == tp::DType::BFloat16);
  CHECK_THROWS_WITH(s.forward(1, {x.to(tp::DType::Float32)}), Catch::Contains("bfloat16"));
}

TEST_CASE("a microbatch of the wrong shape gets a typed error naming the stage", "[stage]") {
  pp::PipelineStage s(block(8), 0, 2, tp::cpu(), {tp::zeros({4, 8})});
  CHECK_THROWS_AS(s.forward(0, {tp::zeros({4, 7})}), pp::StageInputError);
  CHECK_THROWS_WITH(s.forward(0, {tp::zeros({4, 7})}),
                    Catch::Contains("stage 0") && Catch::Contains("input 0") &&
                        Catch::Contains("[4, 8]") && Catch::Contains("[4, 7]"));
  CHECK_THROWS_WITH(s.forward(0, {tp::zeros({4, 8}), tp::zeros({4, 8})}),
                    Catch::Contains("expected 1 inputs"));
}

TEST_CASE("backward before forward is an error", "[stage]") {
  pp::PipelineStage s(block(4), 1, 2, tp::cpu(), {tp::zeros({2, 4})});
  CHECK_THROWS_WITH(s.backward(3, {}), Catch::Contains("before its forward"));
}

TEST_CASE("a stage's thread count applies on the thread that runs its work", "[stage]") {
  auto m0 = block(8);
  pp::PipelineStage s0(m0, 0, 1, tp::cpu(), {tp::zeros({4, 8})});
  CHECK(s0.num_threads() == 0);
  CHECK_THROWS_WITH(s0.set_num_threads(-1), Catch::Contains("set_num_threads needs n >= 1"));
  s0.set_num_threads(1);
  int seen = 0;
  std::thread([&] {
    tp::set_num_threads(2);
    s0.forward(0, {tp::ones({4, 8})});
    seen = tp::get_num_threads();
  }).join();
  CHECK(seen == 1);
}

TEST_CASE("dw_builder builds at I and runs at W, after the weight gradients", "[stage][dw]") {
  tp::manual_seed(3);
  auto m = block(4);
  std::vector<std::string> events;
  tp::Tensor weight = m->find_tensor("0.weight");
  int built = 0;
  pp::PipelineStage stage(m, 1, 3, tp::cpu(), {tp::zeros({2, 4})}, [&] {
    int id = built++;
    events.push_back("build " + std::to_string(id));
    return [&, id] {
      // The runner sees this microbatch's weight gradients already accumulated.
      events.push_back("run " + std::to_string(id) +
                       (weight.grad().defined() ? " with grad" : " without grad"));
    };
  });
  tp::Tensor x = tp::randn({2, 4}), g = tp::randn({2, 4});
  stage.forward(0, {x});
  stage.forward(1, {x});
  stage.backward_input(0, {g});
  stage.backward_input(1, {g});
  CHECK(events == std::vector<std::string>{"build 0", "build 1"});
  stage.backward_weight(1);
  stage.backward_weight(0);
  CHECK(events ==
        std::vector<std::string>{"build 0", "build 1", "run 1 with grad", "run 0 with grad"});

  // A full backward builds and runs at once.
  events.clear();
  stage.forward(2, {x});
  stage.backward(2, {g});
  CHECK(events == std::vector<std::string>{"build 2", "run 2 with grad"});

  // A stage cleared after an error drops its unrun runners.
  events.clear();
  stage.forward(3, {x});
  stage.backward_input(3, {g});
  stage.clear();
  CHECK(events == std::vector<std::string>{"build 3"});
}
