// Tests for nn/module.h: registration, traversal, tied parameters, state_dict and its loading,
// train/eval and moves.
#include <catch2/catch.hpp>

#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

namespace {

// Two linears sharing one weight, a persistent and a non-persistent buffer.
struct Tied : nn::Module {
  Tied() {
    a = register_module("a", nn::Linear(3, 4));
    b = register_module("b", nn::Linear(3, 4, nn::LinearOptions{.bias = false}));
    b->replace_tensor("weight", a->weight);
    b->weight = a->weight;
    running = register_buffer("running", tp::zeros({2}));
    scratch = register_buffer("scratch", tp::zeros({5}), /*persistent=*/false);
  }
  nn::Linear a{nullptr};
  nn::Linear b{nullptr};
  tp::Tensor running, scratch;
};

std::vector<std::string> names(const std::vector<std::pair<std::string, tp::Tensor>>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) out.push_back(item.first);
  return out;
}

}  // namespace

TEST_CASE("named_parameters lists a tied tensor once, state_dict keeps every name", "[module]") {
  auto m = std::make_shared<Tied>();
  CHECK(names(m->named_parameters()) == std::vector<std::string>{"a.weight", "a.bias"});
  CHECK(m->parameters().size() == 2);
  CHECK(names(m->named_buffers()) == std::vector<std::string>{"running", "scratch"});
  tp::StateDict sd = m->state_dict();
  // Own parameters, then persistent buffers, then children: PyTorch's order.
  CHECK(sd.keys() == std::vector<std::string>{"running", "a.weight", "a.bias", "b.weight"});
  CHECK(sd.at("a.weight").shares_storage(m->a->weight));
  CHECK(sd.at("b.weight").shares_storage(m->a->weight));
  CHECK_FALSE(sd.at("a.weight").requires_grad());
}

TEST_CASE("names are unique across parameters, buffers and children", "[module]") {
  nn::Module m;
  m.register_parameter("w", tp::ones({1}));
  CHECK_THROWS_WITH(m.register_buffer("w", tp::ones({1})), Catch::Contains("'w'"));
  CHECK_THROWS_WITH(m.register_module("w", nn::ReLU()), Catch::Contains("'w'"));
  CHECK_THROWS(m.register_parameter("x.y", tp::ones({1})));
}

TEST_CASE("load_state_dict copies in place and keeps ties", "[module]") {
  tp::manual_seed(1);
  auto src = std::make_shared<Tied>();
  tp::manual_seed(2);
  auto dst = std::make_shared<Tied>();
  tp::Tensor weight_before = dst->a->weight;
  REQUIRE(src->a->weight.to_vector() != dst->a->weight.to_vector());
  src->running.fill_(3.0f);
  auto result = dst->load_state_dict(src->state_dict());
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  CHECK(dst->a->weight.is_same(weight_before));  // same tensor, new values
  CHECK(dst->a->weight.to_vector() == src->a->weight.to_vector());
  CHECK(dst->b->weight.is_same(dst->a->weight));
  CHECK(dst->running.to_vector() == std::vector<float>{3, 3});
  CHECK(dst->a->weight.requires_grad());
}

TEST_CASE("load_state_dict names missing, unexpected and mismatched keys", "[module]") {
  auto m = std::make_shared<Tied>();
  tp::StateDict full = m->state_dict();

  tp::StateDict missing;
  for (const auto& [k, v] : full)
    if (k != "a.bias") missing.insert(k, v);
  CHECK_THROWS_WITH(m->load_state_dict(missing), Catch::Contains("missing keys: 'a.bias'"));
  auto relaxed = m->load_state_dict(missing, /*strict=*/false);
  CHECK(relaxed.missing_keys == std::vector<std::string>{"a.bias"});

  tp::StateDict extra = full;
  extra.insert("c.weight", tp::ones({1}));
  CHECK_THROWS_WITH(m->load_state_dict(extra), Catch::Contains("unexpected keys: 'c.weight'"));
  CHECK(m->load_state_dict(extra, false).unexpected_keys == std::vector<std::string>{"c.weight"});

  tp::StateDict wrong;
  for (const auto& [k, v] : full) wrong.insert(k, k == "a.bias" ? tp::ones({7}) : v);
  m->a->weight.detach().fill_(0.5f);
  std::vector<float> before = m->a->weight.to_vector();
  wrong.insert_or_assign("a.weight", tp::ones({4, 3}));
  CHECK_THROWS_WITH(m->load_state_dict(wrong, false), Catch::Contains("shape mismatch") &&
                                                          Catch::Contains("'a.bias'") &&
                                                          Catch::Contains("[7]"));
  CHECK(m->a->weight.to_vector() == before);  // nothing loaded when anything is wrong
}

TEST_CASE("train and eval reach every descendant", "[module]") {
  nn::Sequential seq(nn::Linear(2, 2), nn::Sequential(nn::ReLU(), nn::Linear(2, 2)));
  seq->eval();
  for (auto& [path, module] : seq->named_modules()) CHECK_FALSE(module->is_training());
  seq->train();
  for (auto& [path, module] : seq->named_modules()) CHECK(module->is_training());
  CHECK(seq->children().size() == 2);
}

TEST_CASE("to(cpu) keeps parameter identity", "[module]") {
  auto m = std::make_shared<Tied>();
  tp::Tensor w = m->a->weight;
  m->to(tp::cpu());
  CHECK(m->a->weight.is_same(w));
  CHECK(m->named_parameters()[0].second.is_same(w));
}

TEST_CASE("to(dtype) converts parameters in place and keeps ties and buffers", "[module]") {
  auto m = std::make_shared<Tied>();
  tp::Tensor w = m->a->weight;
  std::vector<float> before = w.to_vector();
  m->to(tp::DType::BFloat16);
  CHECK(m->a->weight.is_same(w));
  CHECK(w.dtype() == tp::DType::BFloat16);
  CHECK(m->b->weight.is_same(w));
  CHECK(m->a->bias.dtype() == tp::DType::BFloat16);
  CHECK(m->running.dtype() == tp::DType::Float32);
  std::vector<float> after = w.to_vector();
  for (size_t i = 0; i < before.size(); ++i) CHECK(after[i] == Approx(before[i]).epsilon(4e-3));
  tp::Tensor y = (*m->a)(tp::ones({1, 3}).to(tp::DType::BFloat16));
  CHECK(y.dtype() == tp::DType::BFloat16);
  m->to(tp::DType::Float32);
  CHECK(w.to_vector() == after);  // widening back is exact
}

TEST_CASE("forward hooks rewrite inputs and outputs, checkpointed or not", "[module]") {
  for (bool checkpointed : {false, true}) {
    INFO("checkpointed " << checkpointed);
    tp::nn::Linear layer(2, 2, tp::nn::LinearOptions{.bias = false});
    layer->weight.detach().copy_(tp::from_vector({1, 0, 0, 1}, {2, 2}));
    layer->set_checkpointed(checkpointed);
    int pre_calls = 0;
    layer->register_forward_pre_hook([&](const std::vector<tp::Tensor>& args) {
      ++pre_calls;
      return std::vector<tp::Tensor>{args[0] * 2.0f};
    });
    layer->register_forward_hook([](const tp::Tensor& y) { return y + 1.0f; });
    layer->register_forward_hook([](const tp::Tensor& y) { return y * 3.0f; });  // after the first
    tp::Tensor x = tp::from_vector({1, 2}, {1, 2}).set_requires_grad(true);
    tp::Tensor y = layer(x);
    CHECK(y.to_vector() == std::vector<float>{9, 15});  // ((x * 2) W^T + 1) * 3
    tp::sum(y).backward();
    CHECK(x.grad().to_vector() == std::vector<float>{6, 6});
    CHECK(pre_calls == (checkpointed ? 2 : 1));  // the recomputation runs the hooks again
  }
}

TEST_CASE("hooks placed around the checkpoint run once a call, outside the inner ones",
          "[module]") {
  using Placement = tp::nn::Module::HookPlacement;
  for (bool checkpointed : {false, true}) {
    INFO("checkpointed " << checkpointed);
    tp::nn::Linear layer(2, 2, tp::nn::LinearOptions{.bias = false});
    layer->weight.detach().copy_(tp::from_vector({1, 0, 0, 1}, {2, 2}));
    layer->set_checkpointed(checkpointed);
    int outer_calls = 0, inner_calls = 0;
    layer->register_forward_pre_hook([&](const std::vector<tp::Tensor>& args) {
      ++inner_calls;
      return std::vector<tp::Tensor>{args[0] + 1.0f};
    });
    layer->register_forward_pre_hook(
        [&](const std::vector<tp::Tensor>& args) {
          ++outer_calls;
          return std::vector<tp::Tensor>{args[0] * 2.0f};
        },
        Placement::AroundCheckpoint);
    layer->register_forward_hook([](const tp::Tensor& y) { return y * 3.0f; },
                                 Placement::AroundCheckpoint);
    layer->register_forward_hook([](const tp::Tensor& y) { return y + 1.0f; });
    tp::Tensor x = tp::from_vector({1, 2}, {1, 2}).set_requires_grad(true);
    tp::Tensor y = layer(x);
    CHECK(y.to_vector() == std::vector<float>{12, 18});  // ((x * 2 + 1) W^T + 1) * 3
    tp::sum(y).backward();
    CHECK(x.grad().to_vector() == std::vector<float>{6, 6});
    CHECK(outer_calls == 1);
    CHECK(inner_calls == (checkpointed ? 2 : 1));
  }
}
