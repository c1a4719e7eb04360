// GPT model: construction, GPT-2 initialisation and forward.
#include "tensorplay/nn/gpt.h"

#include <cmath>
#include <stdexcept>

#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/ops/elementwise.h"
#include "tensorplay/core/random.h"
#include "tensorplay/nn/transformer_block.h"

namespace tensorplay::nn {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void check_config(const GPTConfig& c) {
  auto positive = [](int64_t v, const char* name) {
    if (v <= 0)
      throw std::invalid_argument(std::string("GPTConfig.") + name + " must be positive, got " +
                                  std::to_string(v));
  };
  positive(c.vocab_size, "vocab_size");
  positive(c.context_length, "context_length");
  positive(c.n_layer, "n_layer");
  positive(c.n_head, "n_head");
  positive(c.width, "width");
  if (c.width % c.n_head != 0)
    throw std::invalid_argument("GPTConfig: n_head (" + std::to_string(c.n_head) +
                                ") must divide width (" + std::to_string(c.width) + ")");
}

}  // namespace

GPTImpl::GPTImpl(GPTConfig config) : config_(config) {
  check_config(config);
  wte = register_module("wte", Embedding(config.vocab_size, config.width));
  wpe = register_module("wpe", Embedding(config.context_length, config.width));
  drop = register_module("drop", Dropout(config.dropout));
  blocks = register_module("blocks", ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i)
    blocks->push_back(TransformerBlock(config.width, config.n_head, config.dropout));
  ln_f = register_module("ln_f", LayerNorm(config.width));
  lm_head = register_module("lm_head",
                            Linear(config.width, config.vocab_size, LinearOptions{.bias = false}));
  if (config.tie_weights) {
    lm_head->replace_tensor("weight", wte->weight);
    lm_head->weight = wte->weight;
  }
  pos = register_buffer("pos", arange(config.context_length), /*persistent=*/false);
  init_weights();
}

void GPTImpl::init_weights() {
  NoGradGuard no_grad;
  const float residual_std = 0.02f / std::sqrt(2.0f * static_cast<float>(config_.n_layer));
  for (auto& [name, p] : named_parameters()) {
    if (ends_with(name, ".bias")) {
      p.zero_();
    } else if (name.rfind("ln_", 0) == 0 || name.find(".ln_") != std::string::npos) {
      p.fill_(1.0f);
    } else {
      float std = ends_with(name, "c_proj.weight") ? residual_std : 0.02f;
      p.copy_(randn(p.shape()) * std);
    }
  }
}

Tensor GPTImpl::forward(const Tensor& idx) {
  if (idx.dim() != 2)
    throw std::invalid_argument("GPT: expected token ids [B, T], got shape " +
                                to_string(idx.shape()));
  const int64_t time = idx.size(1);
  if (time > config_.context_length)
    throw std::invalid_argument("GPT: sequence length " + std::to_string(time) +
                                " exceeds context_length " +
                                std::to_string(config_.context_length));
  Tensor x = drop(wte(idx) + wpe(pos.slice0(0, time)));  // [B, T, C] + [T, C]
  for (const auto& block : *blocks) x = (*block)(x);
  return lm_head(ln_f(x));
}

std::string GPTImpl::extra_repr() const {
  return "vocab_size=" + std::to_string(config_.vocab_size) +
         ", context_length=" + std::to_string(config_.context_length) +
         ", n_layer=" + std::to_string(config_.n_layer) +
         ", n_head=" + std::to_string(config_.n_head) + ", width=" + std::to_string(config_.width);
}

}  // namespace tensorplay::nn
