// Tests for build_stage.h: stages from a Pipe with the traced boundary shapes, typed errors for
// microbatches of the wrong shape or dtype, uneven batch sizes, split backward.
#include "models.h"

using namespace stages_test;

TEST_CASE("build_stage takes the boundary shapes from the Pipe", "[build_stage]") {
  tp::manual_seed(40);
  ExampleCode model(8);
  tp::Tensor x = tp::randn({4, 8}), y = tp::randn({4, 8});
  auto pipe = pp::pipeline(model, {x, y});
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  REQUIRE(stages.size() == 4);
  for (int s = 0; s < 4; ++s) {
    CHECK(stages[s]->stage_index() == s);
    CHECK(stages[s]->num_stages() == 4);
    if (s + 1 < 4) CHECK(stages[s]->output_meta() == pipe.boundary(s));
    if (s > 0) CHECK(stages[s]->input_meta() == pipe.boundary(s - 1));
  }
  CHECK(stages[1]->input_names() == pipe.boundary_names(0));
  CHECK_THROWS_WITH(pp::build_stage(pipe, 4, tp::cpu()), Catch::Contains("out of range"));
}

TEST_CASE("a microbatch of the wrong shape or dtype to a built stage is a typed error",
          "[build_stage]") {
  tp::manual_seed(41);
  ExampleCode model(8);
  tp::Tensor x = tp::randn({4, 8}), y = tp::randn({4, 8});
  auto pipe = pp::pipeline(model, {x, y});
  auto stage1 = pp::build_stage(pipe, 1, tp::cpu());
  std::string name = pipe.boundary_names(0)[1];
  std::vector<tp::Tensor> wrong = {tp::randn({4, 8}), tp::randn({4, 9})};
  CHECK_THROWS_AS(stage1.forward(0, wrong), pp::StageInputError);
  CHECK_THROWS_WITH(stage1.forward(0, wrong),
                    Catch::Contains("stage 1") && Catch::Contains("input 1 ('" + name + "')") &&
                        Catch::Contains("expected [4, 8] float32") && Catch::Contains("[4, 9]"));
  std::vector<tp::Tensor> wrong_dtype = {tp::randn({4, 8}),
                                         tp::randn({4, 8}).to(tp::DType::BFloat16)};
  CHECK_THROWS_WITH(stage1.forward(0, wrong_dtype),
                    Catch::Contains("input 1") && Catch::Contains("bfloat16"));
  auto stage0 = pp::build_stage(pipe, 0, tp::cpu());
  CHECK_THROWS_WITH(stage0.forward(0, {x}), Catch::Contains("expected 2 inputs"));
}

TEST_CASE("built stages run uneven microbatches and split backward", "[build_stage]") {
  tp::manual_seed(42);
  MlpStack model(8, 4);
  tp::Tensor x = tp::randn({4, 8});
  auto pipe = pp::pipeline(model, {x}, {.split_spec = {{"layers.2", pp::SplitPoint::Beginning}}});
  auto stages = pp::build_stages(pipe, {tp::cpu(), tp::cpu()});
  // A smaller last microbatch (batch 3 instead of 4) passes the shape check.
  tp::Tensor small = tp::randn({3, 8}), target = tp::randn({3, 8});
  auto h = stages[0]->forward(0, {small});
  auto out = stages[1]->forward(0, h);
  CHECK(out[0].to_vector() == model(small).to_vector());
  stages[1]->compute_loss(
      0, target, [](const tp::Tensor& o, const tp::Tensor& t) { return tp::nn::mse_loss(o, t); });
  auto g = stages[1]->backward_input(0, {});
  stages[1]->backward_weight(0);
  stages[0]->backward(0, g);
  NamedGrads split;
  for (auto& s : stages) collect_grads(s->module(), split);
  for (auto& s : stages) s->module().zero_grad();
  check_grads(split, reference_grads(model, {small}, {}, target));
}

TEST_CASE("an SGD step over the stages' parameters equals one on the model", "[build_stage]") {
  tp::manual_seed(43);
  ExampleCode model(4), twin(4);
  for (const auto& [name, p] : model.named_parameters()) twin.find_tensor(name).copy_(p);
  tp::Tensor x = tp::randn({2, 4}), y = tp::randn({2, 4}), target = tp::randn({2, 4});
  auto pipe = pp::pipeline(model, {x, y});
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  // mm_param1 is listed twice (stage 0 and its copy in stage 1).
  CHECK(pp::parameters(stages).size() == model.parameters().size() + 1);
  run_microbatch(pipe, stages, {x, y}, target);
  pp::sync_tied_gradients(pp::stage_pointers(stages), pipe);
  tp::optim::SGD(pp::parameters(stages), {.lr = 0.1f}).step();

  tp::nn::mse_loss(twin.forward_args({x, y}, {}), target).backward();
  tp::optim::SGD(twin.parameters(), {.lr = 0.1f}).step();
  for (const auto& s : stages)
    for (const auto& [name, p] : s->module().named_parameters()) {
      INFO(name);
      CHECK(close(p.to_vector(), twin.find_tensor(name).to_vector()));
    }
  // The stages share the model's tensors: the model itself took the step.
  CHECK(close(model.mm_param1.to_vector(), twin.mm_param1.to_vector()));
}
