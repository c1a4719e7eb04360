// Tests for tracer.h: what the graph records (inputs, parameters, buffers, constants, module
// paths through uncalled containers, pipe_split positions, dead ops) and its errors.
#include "models.h"
#include "tensorplay/nn/module_list.h"
#include "tensorplay/pipelining/tracer.h"

using namespace stages_test;

namespace {

/// Calls the members of a ModuleList directly, as a GPT calls its blocks.
struct ListModel : tp::nn::Module {
  ListModel() {
    blocks = register_module(
        "blocks", tp::nn::ModuleList(std::make_shared<Block>(4), std::make_shared<Block>(4)));
  }
  tp::Tensor forward(const tp::Tensor& x) override {
    tp::Tensor h = x;
    for (const auto& b : *blocks) h = (*b)(h);
    tp::Tensor unused = tp::relu(x);  // dead: nothing returns it
    (void)unused;
    return h;
  }
  tp::nn::ModuleList blocks;
};

int count_kind(const pp::Graph& g, pp::ValueKind kind) {
  int n = 0;
  for (const auto& v : g.values) n += v.kind == kind;
  return n;
}

}  // namespace

TEST_CASE("the trace records inputs, state, constants and the ops in order", "[tracer]") {
  tp::manual_seed(20);
  ExampleCode model(4);
  tp::Tensor x = tp::randn({2, 4}), y = tp::randn({2, 4});
  pp::Graph g = pp::trace(model, {x, y});
  REQUIRE(g.inputs.size() == 2);
  CHECK(g.num_positional_inputs == 2);
  CHECK(g.values[g.inputs[1]].name == "arg1");
  CHECK(g.nodes.size() == 12);
  CHECK(g.nodes[0].op == "matmul");
  CHECK(g.values[g.nodes[0].inputs[1]].name == "mm_param1");
  CHECK(g.values[g.nodes[0].inputs[1]].kind == pp::ValueKind::Parameter);
  CHECK(g.nodes[4].module_path == "lin1");
  CHECK(g.split_calls == std::vector<int>{3, 5, 9});
  CHECK(count_kind(g, pp::ValueKind::Buffer) == 1);
  REQUIRE(count_kind(g, pp::ValueKind::Constant) == 1);
  for (const auto& v : g.values)
    if (v.kind == pp::ValueKind::Constant)
      CHECK(v.constant.to_vector() == std::vector<float>(4, 0.25f));
  REQUIRE(g.outputs.size() == 1);
  CHECK(g.values[g.outputs[0]].meta == pp::TensorMeta{{2, 4}, tp::DType::Float32});
  // Replaying every node on the inputs reproduces the forward.
  std::vector<tp::Tensor> env(g.values.size());
  env[g.inputs[0]] = x;
  env[g.inputs[1]] = y;
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].kind == pp::ValueKind::Parameter || g.values[v].kind == pp::ValueKind::Buffer)
      env[v] = model.find_tensor(g.values[v].name);
    if (g.values[v].kind == pp::ValueKind::Constant) env[v] = g.values[v].constant;
  }
  for (const auto& node : g.nodes) {
    std::vector<tp::Tensor> ins;
    for (int v : node.inputs) ins.push_back(v < 0 ? tp::Tensor() : env[v]);
    env[node.output] = node.replay(ins);
  }
  CHECK(env[g.outputs[0]].to_vector() == model.forward_args({x, y}, {}).to_vector());
}

TEST_CASE("module paths follow the module tree through a ModuleList", "[tracer]") {
  tp::manual_seed(21);
  ListModel model;
  pp::Graph g = pp::trace(model, {tp::randn({2, 4})});
  // The dead relu is dropped; the blocks' ops are named by their place in the tree.
  REQUIRE(g.nodes.size() == 4);
  CHECK(g.nodes[0].module_path == "blocks.0.net.0");
  CHECK(g.nodes[3].module_path == "blocks.1.net.1");
  CHECK(g.module_ranges.at("blocks.1") == std::pair<int, int>{2, 4});
  CHECK(g.module_ranges.at("blocks") == std::pair<int, int>{0, 4});
  CHECK(g.module_ranges.at("") == std::pair<int, int>{0, 4});
  CHECK(std::find(g.module_paths.begin(), g.module_paths.end(), "blocks.0.net") !=
        g.module_paths.end());
  std::ostringstream os;
  os << g;
  CHECK_THAT(os.str(), Catch::Contains("@blocks.1.net.0"));
}

TEST_CASE("a module traced as a child of another keeps paths relative to itself", "[tracer]") {
  tp::manual_seed(22);
  MlpStack outer(4, 2);
  auto inner = outer.find_module("layers");
  pp::Graph g = pp::trace(*inner, {tp::randn({2, 4})});
  CHECK(g.nodes[0].module_path == "0.net.0");
  CHECK(g.values[g.nodes[0].inputs[1]].name == "0.net.0.weight");
}

TEST_CASE("tracing errors", "[tracer]") {
  tp::manual_seed(23);
  MlpStack model(4, 1);
  tp::Tensor x = tp::randn({2, 4});
  KwargsModel kw(4);
  CHECK_THROWS_WITH(pp::trace(kw, {x}, {{"y", x}, {"shift", tp::randn({2, 4})}}),
                    Catch::Contains("same tensor"));
  CHECK_THROWS_WITH(pp::trace(model, {tp::Tensor()}), Catch::Contains("undefined"));
  // The recorder is gone after a forward that throws.
  CHECK_THROWS_WITH(pp::trace(model, {tp::randn({2, 5})}), Catch::Contains("linear"));
  CHECK(tp::trace::active_recorder() == nullptr);
}

TEST_CASE("pipe_split() is a no-op outside a trace", "[tracer]") {
  tp::manual_seed(24);
  ExampleCode model(4);
  tp::Tensor x = tp::randn({2, 4}), y = tp::randn({2, 4});
  CHECK_NOTHROW(pp::pipe_split());
  CHECK(model.forward_args({x, y}, {}).shape() == tp::Shape{2, 4});
}

TEST_CASE("crossing counts measure each boundary's width", "[tracer]") {
  tp::manual_seed(25);
  ExampleCode model(4);
  pp::Graph g = pp::trace(model, {tp::randn({2, 4}), tp::randn({2, 4})});
  auto c = g.crossing_counts();
  REQUIRE(c.size() == g.nodes.size() + 1);
  CHECK(c[0] == 2);  // both inputs
  CHECK(c[3] == 2);  // the skip connection and relu
  CHECK(c[9] == 1);
  CHECK(c[12] == 1);  // the output
  CHECK(g.parameter_numel() == 2 * 16 + 2 * (16 + 4));
}

TEST_CASE("a tensor with history from an op that did not report itself is an error", "[tracer]") {
  tp::manual_seed(26);
  // Hides one op from the recorder, as an op that forgot trace::record would.
  struct Hidden : tp::nn::Module {
    Hidden() { lin = register_module("lin", tp::nn::Linear(4, 4)); }
    tp::Tensor forward(const tp::Tensor& x) override {
      tp::Tensor h = lin(x);
      auto* recorder = tp::trace::set_active_recorder(nullptr);
      tp::Tensor hidden = tp::relu(h);
      tp::trace::set_active_recorder(recorder);
      return lin(hidden);
    }
    tp::nn::Linear lin{nullptr};
  } model;
  CHECK_THROWS_WITH(
      pp::trace(model, {tp::randn({2, 4})}),
      Catch::Contains("'linear' in module 'lin'") && Catch::Contains("did not report itself"));
}
