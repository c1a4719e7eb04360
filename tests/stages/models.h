// Small models and helpers shared by the stage-splitting tests: an MLP stack, a model cut by
// pipe_split() with a multi-use parameter, a buffer, a constant and a skip connection, and a
// model with keyword inputs; plus gradient comparison by parameter name.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/pipe_split.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/tied_parameters.h"
#include "tensorplay/tensor.h"

namespace stages_test {

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;

/// Linear + ReLU under `net`, as the seed's Block.
struct Block : tp::nn::Module {
  explicit Block(int64_t dim) {
    net = register_module("net", tp::nn::Sequential(tp::nn::Linear(dim, dim), tp::nn::ReLU()));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return net(x); }
  std::string type_name() const override { return "Block"; }
  tp::nn::Sequential net;
};

/// `layers` = Sequential of `n` Blocks.
struct MlpStack : tp::nn::Module {
  MlpStack(int64_t dim, int n) {
    layers = register_module("layers", tp::nn::Sequential());
    for (int i = 0; i < n; ++i) layers->push_back(std::make_shared<Block>(dim));
  }
  tp::Tensor forward(const tp::Tensor& x) override { return layers(x); }
  tp::nn::Sequential layers;
};

/// PyTorch's test_pipe ExampleCode, plus a buffer and a constant: mm_param1 is read in stages
/// 0 and 1, the skip connection goes from stage 0 to stage 2, `scale` is a buffer and the
/// 0.25 offset a constant made in forward. Four stages by pipe_split().
struct ExampleCode : tp::nn::Module {
  explicit ExampleCode(int64_t d) {
    mm_param1 = register_parameter("mm_param1", tp::randn({d, d}) * 0.3f);
    mm_param2 = register_parameter("mm_param2", tp::randn({d, d}) * 0.3f);
    scale = register_buffer("scale", tp::full({d}, 0.5f));
    lin1 = register_module("lin1", tp::nn::Linear(d, d));
    lin2 = register_module("lin2", tp::nn::Linear(d, d));
    dim = d;
  }
  tp::Tensor forward_args(const std::vector<tp::Tensor>& args, const tp::nn::TensorDict&) override {
    tp::Tensor x = tp::matmul(args[0], mm_param1);
    tp::Tensor skip = x;
    x = tp::relu(x + args[1]);
    pp::pipe_split();
    x = lin1(tp::matmul(x, mm_param1));
    pp::pipe_split();
    x = tp::relu(x) + skip;
    x = tp::matmul(x, mm_param2) * scale;
    pp::pipe_split();
    x = tp::relu(lin2(x)) + tp::full({dim}, 0.25f);
    return x;
  }
  tp::Tensor mm_param1, mm_param2, scale;
  tp::nn::Linear lin1{nullptr}, lin2{nullptr};
  int64_t dim;
};

/// Keyword inputs: forward(x, y=..., shift=...) where `shift` is read only in the last block
/// (so it travels through the stages before).
struct KwargsModel : tp::nn::Module {
  explicit KwargsModel(int64_t d) {
    block0 = register_module("block0", std::make_shared<Block>(d));
    block1 = register_module("block1", std::make_shared<Block>(d));
    block2 = register_module("block2", std::make_shared<Block>(d));
  }
  tp::Tensor forward_args(const std::vector<tp::Tensor>& args,
                          const tp::nn::TensorDict& kwargs) override {
    tp::Tensor x = (*block0)(args[0] + kwargs.at("y"));
    x = (*block1)(x);
    return (*block2)(x)-kwargs.at("shift");
  }
  std::shared_ptr<Block> block0, block1, block2;
};

/// Gradients by parameter name (cloned values).
using NamedGrads = std::map<std::string, std::vector<float>>;

/// Microbatch 0 through every stage, forward then backward, with an MSE loss on the last
/// stage's output (no tied-gradient sync).
inline void run_microbatch(const pp::Pipe& pipe,
                           const std::vector<std::shared_ptr<pp::PipelineStage>>& stages,
                           const std::vector<tp::Tensor>& inputs, const tp::Tensor& target) {
  auto values = pipe.flatten_inputs(inputs, {});
  for (auto& s : stages) values = s->forward(0, values);
  stages.back()->compute_loss(
      0, target, [](const tp::Tensor& o, const tp::Tensor& t) { return tp::nn::mse_loss(o, t); });
  std::vector<tp::Tensor> grads;
  for (auto s = stages.rbegin(); s != stages.rend(); ++s) grads = (*s)->backward(0, grads);
}

inline void collect_grads(const tp::nn::Module& m, NamedGrads& out) {
  for (const auto& [name, p] : m.named_parameters())
    if (p.grad().defined()) out[name] = p.grad().to_vector();
}

/// max |a - b| / max |b| <= tol.
inline bool close(const std::vector<float>& a, const std::vector<float>& b, double tol = 1e-5) {
  if (a.size() != b.size()) return false;
  double diff = 0, scale = 1e-12;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return diff / scale <= tol;
}

/// Every stage's gradients, stitched by name, equal `reference` (every name present).
inline void check_grads(const NamedGrads& split, const NamedGrads& reference) {
  for (const auto& [name, g] : reference) {
    INFO("parameter " << name);
    auto it = split.find(name);
    REQUIRE(it != split.end());
    CHECK(close(it->second, g));
  }
  CHECK(split.size() == reference.size());
}

/// The model's loss gradients (mse against `target`), cleared afterwards.
inline NamedGrads reference_grads(tp::nn::Module& model, const std::vector<tp::Tensor>& args,
                                  const tp::nn::TensorDict& kwargs, const tp::Tensor& target) {
  model.zero_grad();
  tp::nn::mse_loss(model.forward_args(args, kwargs), target).backward();
  NamedGrads out;
  collect_grads(model, out);
  model.zero_grad();
  return out;
}

/// Runs one microbatch through PipelineStages built from `pipe` (forward in order, backward in
/// reverse, tied gradients synced) and returns the stitched gradients; clears them after.
inline NamedGrads stage_grads(const pp::Pipe& pipe, const std::vector<tp::Tensor>& args,
                              const tp::nn::TensorDict& kwargs, const tp::Tensor& target,
                              tp::Tensor* output = nullptr) {
  auto stages = pp::build_stages(pipe, {tp::cpu()});
  std::vector<tp::Tensor> values = pipe.flatten_inputs(args, kwargs);
  for (auto& s : stages) values = s->forward(0, values);
  if (output) *output = values.at(0);
  stages.back()->compute_loss(
      0, target, [](const tp::Tensor& o, const tp::Tensor& t) { return tp::nn::mse_loss(o, t); });
  std::vector<tp::Tensor> grads;
  for (int s = static_cast<int>(stages.size()) - 1; s >= 0; --s)
    grads = stages[s]->backward(0, grads);
  pp::sync_tied_gradients(pp::stage_pointers(stages), pipe);
  NamedGrads out;
  for (auto& s : stages) collect_grads(s->module(), out);
  for (auto& s : stages) s->module().zero_grad();
  return out;
}

}  // namespace stages_test
