// Transformer-shaped models split into stages (port of PyTorch's test_transformer, plus a small
// GPT-2 with attention and tied embedding / lm_head weights cut at its blocks).
#include <chrono>
#include <iostream>
#include <optional>

#include "models.h"
#include "tensorplay/nn/gpt.h"
#include "tensorplay/nn/module_list.h"

using namespace stages_test;

namespace {

struct MlpModule : tp::nn::Module {
  explicit MlpModule(int64_t d) {
    net1 = register_module("net1", tp::nn::Linear(d, d));
    relu = register_module("relu", tp::nn::ReLU());
    net2 = register_module("net2", tp::nn::Linear(d, d));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return net2(relu(net1(x))); }
  tp::nn::Linear net1{nullptr}, net2{nullptr};
  tp::nn::ReLU relu{nullptr};
};

struct TransformerLike : tp::nn::Module {
  TransformerLike(int64_t d, int n) {
    layers = register_module("layers", tp::nn::Sequential());
    for (int i = 0; i < n; ++i) layers->push_back(std::make_shared<MlpModule>(d));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return layers(x); }
  tp::nn::Sequential layers;
};

/// GPT-2 in miniature: token and position embeddings, pre-norm blocks with causal attention and
/// a GELU MLP, final norm, lm_head tied to the token embedding. Inputs: token ids as float32.
struct MiniBlock : tp::nn::Module {
  MiniBlock(int64_t c, int64_t heads) : c_(c), heads_(heads) {
    ln_1_w = register_parameter("ln_1_weight", tp::ones({c}));
    ln_1_b = register_parameter("ln_1_bias", tp::zeros({c}));
    c_attn = register_module("c_attn", tp::nn::Linear(c, 3 * c));
    attn_proj = register_module("attn_proj", tp::nn::Linear(c, c));
    ln_2_w = register_parameter("ln_2_weight", tp::ones({c}));
    ln_2_b = register_parameter("ln_2_bias", tp::zeros({c}));
    c_fc = register_module("c_fc", tp::nn::Linear(c, 4 * c));
    mlp_proj = register_module("mlp_proj", tp::nn::Linear(4 * c, c));
  }
  tp::Tensor forward(const tp::Tensor& x) override {
    int64_t b = x.size(0), t = x.size(1), d = c_ / heads_;
    auto qkv = tp::split(c_attn(tp::layer_norm(x, c_, ln_1_w, ln_1_b)), c_, 2);
    auto heads = [&](const tp::Tensor& z) {
      return tp::transpose(tp::reshape(z, {b, t, heads_, d}), 1, 2);
    };
    tp::Tensor y =
        tp::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), true);
    tp::Tensor h = x + attn_proj(tp::reshape(tp::transpose(y, 1, 2), {b, t, c_}));
    return h + mlp_proj(tp::gelu(c_fc(tp::layer_norm(h, c_, ln_2_w, ln_2_b))));
  }
  int64_t c_, heads_;
  tp::Tensor ln_1_w, ln_1_b, ln_2_w, ln_2_b;
  tp::nn::Linear c_attn{nullptr}, attn_proj{nullptr}, c_fc{nullptr}, mlp_proj{nullptr};
};

struct MiniGpt : tp::nn::Module {
  MiniGpt(int64_t vocab, int64_t block_size, int64_t c, int64_t heads, int layers) : c_(c) {
    wte = register_parameter("wte", tp::randn({vocab, c}) * 0.1f);
    wpe = register_parameter("wpe", tp::randn({block_size, c}) * 0.1f);
    blocks = register_module("blocks", tp::nn::ModuleList());
    for (int i = 0; i < layers; ++i) blocks->push_back(std::make_shared<MiniBlock>(c, heads));
    ln_f_w = register_parameter("ln_f_weight", tp::ones({c}));
    ln_f_b = register_parameter("ln_f_bias", tp::zeros({c}));
  }
  tp::Tensor forward(const tp::Tensor& idx) override {
    int64_t t = idx.size(1);
    tp::Tensor x = tp::embedding(idx, wte) + tp::embedding(tp::arange(t), wpe);
    for (const auto& block : *blocks) x = (*block)(x);
    return tp::linear(tp::layer_norm(x, c_, ln_f_w, ln_f_b), wte);  // lm_head tied to wte
  }
  int64_t c_;
  tp::Tensor wte, wpe, ln_f_w, ln_f_b;
  tp::nn::ModuleList blocks{nullptr};
};

tp::Tensor token_ids(int64_t b, int64_t t, int64_t vocab) {
  std::vector<float> ids;
  for (int64_t i = 0; i < b * t; ++i) ids.push_back(static_cast<float>((i * 7 + 3) % vocab));
  return tp::from_vector(ids, {b, t});
}

}  // namespace

TEST_CASE("a transformer-like stack splits in two with every layer kept", "[transformer]") {
  tp::manual_seed(80);
  TransformerLike model(16, 8);
  tp::Tensor x = tp::randn({4, 16});
  auto pipe = pp::pipeline(model, {x}, {.split_spec = {{"layers.4", pp::SplitPoint::Beginning}}});
  REQUIRE(pipe.num_stages() == 2);
  std::vector<std::string> layers;
  for (int s = 0; s < 2; ++s)
    for (const auto& [name, child] : pipe.stage_module(s).find_module("layers")->named_children())
      layers.push_back(name);
  CHECK(layers == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7"});
  // The parameterless ReLU modules are mirrored too.
  CHECK(pipe.stage_module(1).find_module("layers.5.relu"));
  CHECK(pipe.forward({x})[0].to_vector() == model(x).to_vector());
}

namespace {
// Four stages: blocks.1, blocks.2 and blocks.3 each begin one.
pp::PipelineOptions split_at_blocks_1_2_3() {
  return {.split_spec = {{"blocks.1", pp::SplitPoint::Beginning},
                         {"blocks.2", pp::SplitPoint::Beginning},
                         {"blocks.3", pp::SplitPoint::Beginning}}};
}
}  // namespace

TEST_CASE("a small GPT cut at its blocks matches outputs and gradients, tied lm_head included",
          "[transformer]") {
  tp::manual_seed(81);
  const int64_t vocab = 11, t = 5, c = 8;
  MiniGpt model(vocab, t, c, 2, 4);
  tp::Tensor idx = token_ids(2, t, vocab), target = tp::randn({2, t, vocab});
  auto pipe = pp::pipeline(model, {idx}, split_at_blocks_1_2_3());
  REQUIRE(pipe.num_stages() == 4);
  for (int s = 0; s < 3; ++s)
    CHECK(pipe.boundary(s) == std::vector<pp::TensorMeta>{{{2, t, c}, tp::DType::Float32}});
  REQUIRE(pipe.tied_parameters().count("wte"));
  CHECK(pipe.tied_parameters().at("wte") == std::vector<int>{0, 3});
  CHECK(pipe.stage_module(3).find_module("blocks.3.c_attn"));
  CHECK_FALSE(pipe.stage_module(3).find_module("blocks.2"));

  tp::Tensor ref = model(idx);
  CHECK(pipe.forward({idx})[0].to_vector() == ref.to_vector());
  auto reference = reference_grads(model, {idx}, {}, target);
  check_grads(stage_grads(pipe, {idx}, {}, target), reference);

  // Policies cut the same model into balanced stages that still reproduce it.
  for (auto policy : {pp::split_by_parameter_count(3), pp::split_by_cost(3)}) {
    auto p = pp::pipeline(model, {idx}, {.split_policy = policy});
    REQUIRE(p.num_stages() == 3);
    CHECK(close(p.forward({idx})[0].to_vector(), ref.to_vector()));
    check_grads(stage_grads(p, {idx}, {}, target), reference);
  }
}

TEST_CASE("the GPT cut into 4 stages at its blocks matches the model", "[transformer][gpt]") {
  tp::manual_seed(82);
  tp::nn::GPT model(tp::nn::GPTConfig{
      .vocab_size = 13, .context_length = 8, .n_layer = 4, .n_head = 2, .width = 16});
  const int64_t batch = 2, time = 8;
  tp::Tensor idx = token_ids(batch, time, 13), target = tp::randn({batch, time, 13});
  auto pipe = pp::pipeline(model, {idx}, split_at_blocks_1_2_3());
  REQUIRE(pipe.num_stages() == 4);
  for (int s = 0; s < 3; ++s)
    CHECK(pipe.boundary(s) == std::vector<pp::TensorMeta>{{{batch, time, 16}, tp::DType::Float32}});
  // The token embedding is read by stage 0 (wte) and stage 3 (lm_head): one tie group.
  CHECK(pipe.tied_parameters() == std::map<std::string, std::vector<int>>{{"wte.weight", {0, 3}}});
  CHECK(pipe.stage_module(0).find_module("blocks.0.attn"));
  CHECK_FALSE(pipe.stage_module(0).find_module("blocks.1"));
  CHECK(pipe.stage_module(3).find_module("lm_head"));
  CHECK(pipe.stage_module(3).find_module("ln_f"));

  // Stage state keys are the model's (the tied weight under its first name, wte.weight).
  auto model_keys = model->state_dict().keys();
  std::set<std::string> model_key_set(model_keys.begin(), model_keys.end()), covered;
  for (int s = 0; s < 4; ++s)
    for (const auto& key : pipe.stage_module(s).state_dict().keys()) {
      INFO("stage " << s << " key " << key);
      CHECK(model_key_set.count(key));
      covered.insert(key);
    }
  for (const auto& [name, p] : model->named_parameters()) CHECK(covered.count(name));

  tp::Tensor ref = model(idx);
  CHECK(pipe.forward({idx})[0].to_vector() == ref.to_vector());
  auto reference = reference_grads(*model, {idx}, {}, target);
  tp::Tensor stage_out;
  check_grads(stage_grads(pipe, {idx}, {}, target, &stage_out), reference);
  CHECK(stage_out.to_vector() == ref.to_vector());
}

TEST_CASE("split_by_cost cuts a GPT between blocks", "[transformer][gpt][policy]") {
  tp::manual_seed(84);
  tp::nn::GPT model(tp::nn::GPTConfig{
      .vocab_size = 13, .context_length = 8, .n_layer = 8, .n_head = 2, .width = 16});
  tp::Tensor idx = token_ids(2, 8, 13);
  auto pipe = pp::pipeline(model, {idx}, {.split_policy = pp::split_by_cost(4)});
  REQUIRE(pipe.num_stages() == 4);
  for (int s = 0; s < 3; ++s) {
    INFO("cut " << s);
    CHECK(pipe.boundary(s).size() == 1);
    CHECK(pipe.graph().nodes[pipe.cuts()[s]].module_path ==
          "blocks." + std::to_string(2 * (s + 1)) + ".ln_1");
  }
  CHECK(close(pipe.forward({idx})[0].to_vector(), model(idx).to_vector()));
}

TEST_CASE("cost of tracing and splitting a GPT (timing, not run by default)", "[.bench]") {
  tp::manual_seed(83);
  tp::nn::GPT model(tp::nn::GPTConfig{
      .vocab_size = 512, .context_length = 64, .n_layer = 12, .n_head = 8, .width = 256});
  tp::Tensor idx = token_ids(4, 64, 512);
  auto time = [](auto&& fn) {
    auto start = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  double forward_ms = time([&] { model(idx); });
  std::optional<pp::Pipe> pipe;
  double split_ms = time(
      [&] { pipe.emplace(pp::pipeline(model, {idx}, {.split_policy = pp::split_by_cost(4)})); });
  double pipe_forward_ms = time([&] { pipe->forward({idx}); });
  std::cout << "GPT 12x256, batch 4x64: forward " << forward_ms << " ms, pipeline() " << split_ms
            << " ms (" << pipe->graph().nodes.size() << " ops, cuts";
  auto crossing = pipe->graph().crossing_counts();
  for (int c : pipe->cuts())
    std::cout << " " << c << " (before " << pipe->graph().nodes[c].module_path << ", "
              << crossing[c] << " values)";
  std::cout << "), Pipe::forward " << pipe_forward_ms << " ms\n";
  CHECK(pipe->num_stages() == 4);
}

TEST_CASE("GPT stages built from a trace run a smaller (uneven) microbatch", "[transformer][gpt]") {
  tp::manual_seed(83);
  tp::nn::GPT model(tp::nn::GPTConfig{
      .vocab_size = 13, .context_length = 8, .n_layer = 2, .n_head = 2, .width = 16});
  auto pipe = pp::pipeline(model, {token_ids(4, 8, 13)},
                           {.split_spec = {{"blocks.1", pp::SplitPoint::Beginning}}});
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  tp::Tensor small = token_ids(3, 8, 13);  // the last microbatch of an uneven split
  std::vector<tp::Tensor> values = {small};
  for (auto& s : stages) values = s->forward(0, values);
  CHECK(values.at(0).to_vector() == model(small).to_vector());
  for (auto& s : stages) s->clear();
}
