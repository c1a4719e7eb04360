// Tests for stage_module.h: the mirrored module tree, inputs by position and keyword, several
// outputs, pass-through values, and errors with the op and module that failed.
#include "models.h"

using namespace stages_test;

TEST_CASE("a stage module mirrors the model's tree for what it holds", "[stage_module]") {
  tp::manual_seed(70);
  MlpStack model(4, 3);
  tp::Tensor x = tp::randn({2, 4});
  auto pipe = pp::pipeline(model, {x}, {.split_spec = {{"layers.1", pp::SplitPoint::Beginning}}});
  pp::StageModule& s1 = pipe.stage_module(1);
  CHECK(s1.find_module("layers.0") == nullptr);
  REQUIRE(s1.find_module("layers.2.net.1"));
  CHECK(s1.find_module("layers.2.net.1")->type_name() == "ReLU");
  CHECK(s1.find_module("layers.2")->type_name() == "Block");
  // Mirrored children hold state only; calling one explains what to do instead.
  CHECK_THROWS_WITH((*s1.find_module("layers.2"))(x), Catch::Contains("forward_outputs"));
  CHECK(s1.input_names().size() == 1);
  CHECK(s1.output_meta() == std::vector<pp::TensorMeta>{{{2, 4}, tp::DType::Float32}});
  std::ostringstream os;
  s1.print_ops(os);
  CHECK_THAT(os.str(), Catch::Contains("linear(") && Catch::Contains("@layers.2.net.0"));
}

TEST_CASE("stage inputs by keyword, several outputs and pass-through gradients", "[stage_module]") {
  tp::manual_seed(71);
  KwargsModel model(4);
  tp::Tensor x = tp::randn({2, 4}), y = tp::randn({2, 4}), shift = tp::randn({2, 4});
  auto pipe = pp::pipeline(model, {x}, {{"y", y}, {"shift", shift}},
                           {.split_spec = {{"block1", pp::SplitPoint::Beginning},
                                           {"block2", pp::SplitPoint::Beginning}}});
  pp::StageModule& s0 = pipe.stage_module(0);
  auto by_keyword = s0.forward_outputs({x}, {{"y", y}, {"shift", shift}});
  auto by_position = s0.forward_outputs({x, shift, y}, {});
  REQUIRE(by_keyword.size() == 2);
  for (size_t i = 0; i < 2; ++i) CHECK(by_keyword[i].to_vector() == by_position[i].to_vector());
  CHECK_THROWS_WITH(s0.forward_args({x, shift, y}, {}), Catch::Contains("sends 2 values"));
  CHECK_THROWS_WITH(s0.forward_outputs({x}, {{"y", y}, {"shift", shift}, {"z", y}}),
                    Catch::Contains("unexpected keyword input 'z'"));
  CHECK_THROWS_WITH(pipe.stage_module(1).forward_outputs({x}, {}),
                    Catch::Contains("stage 1: expected 2 inputs"));

  // Stage 1 passes `shift` through: its gradient comes back unchanged.
  pp::StageModule& s1 = pipe.stage_module(1);
  auto names = s1.input_names();
  size_t shift_at = std::find(names.begin(), names.end(), "shift") - names.begin();
  REQUIRE(shift_at < names.size());
  std::vector<tp::Tensor> ins;
  for (const auto& m : s1.input_meta()) ins.push_back(tp::randn(m.shape).requires_grad_());
  auto outs = s1.forward_outputs(ins, {});
  auto out_names = s1.output_names();
  size_t shift_out = std::find(out_names.begin(), out_names.end(), "shift") - out_names.begin();
  REQUIRE(shift_out < out_names.size());
  CHECK(outs[shift_out].to_vector() == ins[shift_at].to_vector());
  tp::Tensor g = tp::randn({2, 4});
  tp::autograd::backward({outs[shift_out]}, {g});
  CHECK(ins[shift_at].grad().to_vector() == g.to_vector());
}

TEST_CASE("an op failing in a stage names the stage, op and module", "[stage_module]") {
  tp::manual_seed(72);
  MlpStack model(4, 2);
  auto pipe = pp::pipeline(model, {tp::randn({2, 4})},
                           {.split_spec = {{"layers.1", pp::SplitPoint::Beginning}}});
  CHECK_THROWS_WITH(pipe.stage_module(1).forward(tp::randn({2, 5})),
                    Catch::Contains("stage 1, op %2 'linear' in 'layers.1.net.0'"));
}

TEST_CASE("a StageModule recomputes only modules it runs ops of", "[stage_module][recompute]") {
  tp::manual_seed(3);
  auto model = std::make_shared<stages_test::MlpStack>(4, 4);
  auto pipe = pp::pipeline(model, {tp::zeros({2, 4})},
                           {.split_spec = {{"layers.2", pp::SplitPoint::Beginning}}});
  auto stage = pipe.stage_module_ptr(0);
  CHECK(stage->runs_ops_of("layers.1"));
  CHECK_FALSE(stage->runs_ops_of("layers.3"));
  CHECK_THROWS_WITH(stage->set_recomputed_modules({"layers.3"}),
                    Catch::Contains("stage 0 runs no op of module 'layers.3'") &&
                        Catch::Contains("this stage's"));
  CHECK_THROWS_WITH(stage->set_recomputed_modules({"nope"}),
                    Catch::Contains("ran no op in a module of that name"));
  stage->set_recomputed_modules({"layers.0", "layers.1"});
  CHECK(stage->recomputed_modules() == std::vector<std::string>{"layers.0", "layers.1"});
  // Values and gradients are those of the plain stage.
  tp::Tensor x = tp::randn({2, 4}).requires_grad_();
  tp::Tensor y = stage->forward(x);
  tp::sum(tp::square(y)).backward();
  std::vector<std::vector<float>> got;
  for (auto& p : stage->parameters()) got.push_back(p.grad().to_vector());
  tp::Tensor gx = x.grad();
  stage->zero_grad();
  stage->set_recomputed_modules({});
  tp::Tensor x2 = x.detach().requires_grad_();
  tp::Tensor y2 = stage->forward(x2);
  CHECK(y2.to_vector() == y.to_vector());
  tp::sum(tp::square(y2)).backward();
  CHECK(x2.grad().to_vector() == gx.to_vector());
  size_t i = 0;
  for (auto& p : stage->parameters()) CHECK(p.grad().to_vector() == got[i++]);
}
