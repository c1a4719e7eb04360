// Tests for pipeline.h: splitting by split_spec, pipe_split() and policies; equivalence of
// outputs and gradients with the unsplit model; names; errors.
#include "models.h"

using namespace stages_test;

namespace {
std::set<std::string> names_of(const std::vector<std::pair<std::string, tp::Tensor>>& named) {
  std::set<std::string> out;
  for (const auto& [n, t] : named) out.insert(n);
  return out;
}
}  // namespace

TEST_CASE("an MLP stack cut by split_spec reproduces outputs, gradients and names", "[pipeline]") {
  tp::manual_seed(10);
  MlpStack model(16, 4);
  tp::Tensor x = tp::randn({4, 16}), target = tp::randn({4, 16});
  auto pipe = pp::pipeline(
      model, {x},
      {.split_spec = {{"layers.1", pp::SplitPoint::Beginning}, {"layers.2", pp::SplitPoint::End}}});
  REQUIRE(pipe.num_stages() == 3);
  CHECK(pipe.boundary(0) == std::vector<pp::TensorMeta>{{{4, 16}, tp::DType::Float32}});
  CHECK(pipe.boundary(1).size() == 1);
  CHECK_THROWS_AS(pipe.boundary(2), std::out_of_range);

  tp::Tensor ref = model(x);
  CHECK(pipe.forward({x})[0].to_vector() == ref.to_vector());

  // Layer completeness and names: every Block appears in exactly one stage, and the stages'
  // parameters are the model's, split without overlap.
  std::vector<std::string> layers;
  std::set<std::string> all_names;
  auto model_names = names_of(model.named_parameters());
  for (int s = 0; s < pipe.num_stages(); ++s) {
    auto layers_mod = pipe.stage_module(s).find_module("layers");
    REQUIRE(layers_mod);
    for (const auto& [name, child] : layers_mod->named_children()) layers.push_back(name);
    for (const auto& name : names_of(pipe.stage_module(s).named_parameters())) {
      CHECK(model_names.count(name));
      CHECK(all_names.insert(name).second);
    }
  }
  CHECK(layers == std::vector<std::string>{"0", "1", "2", "3"});
  CHECK(all_names == model_names);
  CHECK(pipe.stage_module(1).find_module("layers.1.net.0")->type_name() == "Linear");
  // The stage's parameters are the model's tensors.
  CHECK(pipe.stage_module(0)
            .find_tensor("layers.0.net.0.weight")
            .is_same(model.find_tensor("layers.0.net.0.weight")));

  auto reference = reference_grads(model, {x}, {}, target);
  check_grads(stage_grads(pipe, {x}, {}, target), reference);
}

TEST_CASE("pipe_split() cuts, a shared parameter, buffer, constant and skip connection work",
          "[pipeline]") {
  tp::manual_seed(11);
  ExampleCode model(8);
  tp::Tensor x = tp::randn({4, 8}), y = tp::randn({4, 8}), target = tp::randn({4, 8});
  auto pipe = pp::pipeline(model, {x, y});
  REQUIRE(pipe.num_stages() == 4);

  tp::Tensor ref = model.forward_args({x, y}, {});
  auto out = pipe.forward({x, y});
  REQUIRE(out.size() == 1);
  CHECK(out[0].to_vector() == ref.to_vector());

  // The skip connection made in stage 0 travels through stage 1 to stage 2.
  CHECK(pipe.boundary(0).size() == 2);
  CHECK(pipe.boundary(1).size() == 2);
  CHECK(pipe.boundary(2).size() == 1);
  // mm_param1 is read by stages 0 and 1: a tie group with a copy in stage 1.
  REQUIRE(pipe.tied_parameters().count("mm_param1"));
  CHECK(pipe.tied_parameters().at("mm_param1") == std::vector<int>{0, 1});
  tp::Tensor p0 = pipe.stage_module(0).find_tensor("mm_param1");
  tp::Tensor p1 = pipe.stage_module(1).find_tensor("mm_param1");
  CHECK(p0.is_same(model.mm_param1));
  CHECK_FALSE(p1.is_same(p0));
  CHECK(p1.is_leaf());
  CHECK(p1.to_vector() == p0.to_vector());
  // The buffer lives in stage 2 under its own name; state keys are a subset of the model's.
  CHECK(names_of(pipe.stage_module(2).named_buffers()) == std::set<std::string>{"scale"});
  auto model_keys = model.state_dict().keys();
  std::set<std::string> model_key_set(model_keys.begin(), model_keys.end()), stage_keys;
  for (int s = 0; s < pipe.num_stages(); ++s)
    for (const auto& key : pipe.stage_module(s).state_dict().keys()) {
      CHECK(model_key_set.count(key));
      stage_keys.insert(key);
    }
  CHECK(stage_keys == model_key_set);

  auto reference = reference_grads(model, {x, y}, {}, target);
  tp::Tensor stage_out;
  auto split = stage_grads(pipe, {x, y}, {}, target, &stage_out);
  CHECK(stage_out.to_vector() == ref.to_vector());
  check_grads(split, reference);

  // The same through Pipe::forward and one backward.
  tp::nn::mse_loss(pipe.forward({x, y})[0], target).backward();
  pp::sync_tied_gradients(pipe);
  NamedGrads via_pipe;
  for (int s = 0; s < pipe.num_stages(); ++s) collect_grads(pipe.stage_module(s), via_pipe);
  check_grads(via_pipe, reference);
  // Both copies of the tied parameter hold the summed gradient.
  CHECK(p0.grad().to_vector() == p1.grad().to_vector());
}

TEST_CASE("keyword inputs reach the stages that read them", "[pipeline]") {
  tp::manual_seed(12);
  KwargsModel model(8);
  tp::Tensor x = tp::randn({4, 8}), y = tp::randn({4, 8}), shift = tp::randn({4, 8});
  tp::Tensor target = tp::randn({4, 8});
  tp::nn::TensorDict kwargs{{"y", y}, {"shift", shift}};
  auto pipe = pp::pipeline(model, {x}, kwargs,
                           {.split_spec = {{"block1", pp::SplitPoint::Beginning},
                                           {"block2", pp::SplitPoint::Beginning}}});
  REQUIRE(pipe.num_stages() == 3);
  // Stage 0 takes x, then the keyword inputs by name.
  CHECK(pipe.stage_module(0).input_names() == std::vector<std::string>{"arg0", "shift", "y"});
  // `shift` is read in stage 2 only, so stage 0 and 1 pass it on.
  auto names0 = pipe.boundary_names(0), names1 = pipe.boundary_names(1);
  CHECK(std::count(names0.begin(), names0.end(), "shift") == 1);
  CHECK(std::count(names1.begin(), names1.end(), "shift") == 1);
  CHECK(std::count(names0.begin(), names0.end(), "y") == 0);

  tp::Tensor ref = model.forward_args({x}, kwargs);
  CHECK(pipe.forward({x}, kwargs)[0].to_vector() == ref.to_vector());
  CHECK_THROWS_WITH(pipe.forward({x}, {{"y", y}}),
                    Catch::Contains("missing keyword input 'shift'"));

  auto reference = reference_grads(model, {x}, kwargs, target);
  check_grads(stage_grads(pipe, {x}, kwargs, target), reference);
}

TEST_CASE("the original module stays usable after splitting", "[pipeline]") {
  tp::manual_seed(13);
  auto model = std::make_shared<MlpStack>(8, 2);
  tp::Tensor x = tp::randn({2, 8});
  tp::Tensor before = (*model)(x);
  auto pipe = pp::pipeline(model, {x}, {.split_spec = {{"layers.1", pp::SplitPoint::Beginning}}});
  CHECK((*model)(x).to_vector() == before.to_vector());
  CHECK(pipe.forward({x})[0].to_vector() == before.to_vector());
}

TEST_CASE("split_spec End and Beginning of neighbours make one cut", "[pipeline]") {
  tp::manual_seed(14);
  MlpStack model(4, 3);
  tp::Tensor x = tp::randn({2, 4});
  auto pipe = pp::pipeline(
      model, {x},
      {.split_spec = {{"layers.0", pp::SplitPoint::End}, {"layers.1", pp::SplitPoint::Beginning}}});
  CHECK(pipe.num_stages() == 2);
}

TEST_CASE("pipeline errors name what was wrong", "[pipeline]") {
  tp::manual_seed(15);
  MlpStack model(4, 3);
  tp::Tensor x = tp::randn({2, 4});
  SECTION("both a spec and a policy") {
    CHECK_THROWS_WITH(pp::pipeline(model, {x},
                                   {.split_spec = {{"layers.1", pp::SplitPoint::Beginning}},
                                    .split_policy = pp::split_by_parameter_count(2)}),
                      Catch::Contains("both a split_spec and a split_policy"));
  }
  SECTION("an unknown module path, with the nearest valid ones") {
    CHECK_THROWS_WITH(
        pp::pipeline(model, {x}, {.split_spec = {{"layer.1", pp::SplitPoint::Beginning}}}),
        Catch::Contains("'layer.1'") && Catch::Contains("names no module") &&
            Catch::Contains("'layers.1'"));
  }
  SECTION("a module that ran no ops") {
    struct WithSpare : tp::nn::Module {
      WithSpare() {
        used = register_module("used", tp::nn::Linear(4, 4));
        spare = register_module("spare", tp::nn::Linear(4, 4));
      }
      tp::Tensor forward(const tp::Tensor& x) override { return tp::relu(used(x)); }
      tp::nn::Linear used{nullptr}, spare{nullptr};
    } spare_model;
    CHECK_THROWS_WITH(
        pp::pipeline(spare_model, {x}, {.split_spec = {{"spare", pp::SplitPoint::End}}}),
        Catch::Contains("'spare'") && Catch::Contains("ran no ops"));
  }
  SECTION("a cut that leaves a stage empty") {
    CHECK_THROWS_WITH(
        pp::pipeline(model, {x}, {.split_spec = {{"layers.0", pp::SplitPoint::Beginning}}}),
        Catch::Contains("stage 0") && Catch::Contains("empty"));
    CHECK_THROWS_WITH(pp::pipeline(model, {x}, {.split_spec = {{"layers", pp::SplitPoint::End}}}),
                      Catch::Contains("last stage") && Catch::Contains("empty"));
  }
}

TEST_CASE("Pipe prints its stages, boundaries and ties", "[pipeline]") {
  tp::manual_seed(16);
  ExampleCode model(4);
  tp::Tensor x = tp::randn({2, 4}), y = tp::randn({2, 4});
  auto pipe = pp::pipeline(model, {x, y});
  std::ostringstream os;
  os << pipe;
  std::string text = os.str();
  CHECK_THAT(text, Catch::Contains("Pipe(num_stages=4)"));
  CHECK_THAT(text, Catch::Contains("sends to stage 1"));
  CHECK_THAT(text, Catch::Contains("tied: mm_param1 in stages 0 1"));
  CHECK_THAT(text, Catch::Contains("(lin1): Linear"));
}
