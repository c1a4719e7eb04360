// Llama model: construction, transformers' initialisation and forward.
#include "tensorplay/nn/llama.h"

#include <stdexcept>

#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/ops/elementwise.h"
#include "tensorplay/core/random.h"
#include "tensorplay/nn/llama_block.h"

namespace tensorplay::nn {
namespace {

void check_config(const LlamaConfig& c) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("LlamaConfig: " + what); };
  auto positive = [&](int64_t v, const char* name) {
    if (v <= 0) fail(std::string(name) + " must be positive, got " + std::to_string(v));
  };
  positive(c.vocab_size, "vocab_size");
  positive(c.context_length, "context_length");
  positive(c.n_layer, "n_layer");
  positive(c.n_head, "n_head");
  positive(c.width, "width");
  positive(c.mlp_width, "mlp_width");
  if (c.n_kv_head < 0)
    fail("n_kv_head must be positive (or 0 for n_head), got " + std::to_string(c.n_kv_head));
  if (c.width % c.n_head != 0 || (c.width / c.n_head) % 2 != 0)
    fail("n_head (" + std::to_string(c.n_head) + ") must divide width (" + std::to_string(c.width) +
         ") into an even head size (rotary positions turn channel pairs)");
  if (c.n_kv_head > 0 && c.n_head % c.n_kv_head != 0)
    fail("n_kv_head (" + std::to_string(c.n_kv_head) + ") must divide n_head (" +
         std::to_string(c.n_head) + ")");
  if (!(c.rope_theta > 0.0f))
    fail("rope_theta must be positive, got " + std::to_string(c.rope_theta));
  if (!(c.norm_eps >= 0.0f)) fail("norm_eps must be >= 0, got " + std::to_string(c.norm_eps));
}

LlamaConfig filled_in(LlamaConfig c) {
  check_config(c);
  if (c.n_kv_head == 0) c.n_kv_head = c.n_head;
  return c;
}

}  // namespace

std::string describe(const LlamaConfig& c) {
  return "vocab_size=" + std::to_string(c.vocab_size) +
         ", context_length=" + std::to_string(c.context_length) +
         ", n_layer=" + std::to_string(c.n_layer) + ", n_head=" + std::to_string(c.n_head) +
         ", n_kv_head=" + std::to_string(c.n_kv_head) + ", width=" + std::to_string(c.width) +
         ", mlp_width=" + std::to_string(c.mlp_width) +
         ", rope_theta=" + std::to_string(c.rope_theta) +
         ", norm_eps=" + std::to_string(c.norm_eps) +
         ", tie_weights=" + (c.tie_weights ? "1" : "0");
}

LlamaImpl::LlamaImpl(LlamaConfig config) : config_(filled_in(config)) {
  const LlamaConfig& c = config_;
  embed_tokens = register_module("embed_tokens", Embedding(c.vocab_size, c.width));
  layers = register_module("layers", ModuleList());
  const GroupedQueryAttentionOptions attention{.width = c.width,
                                               .heads = c.n_head,
                                               .kv_heads = c.n_kv_head,
                                               .context_length = c.context_length,
                                               .rope_theta = c.rope_theta};
  for (int64_t i = 0; i < c.n_layer; ++i)
    layers->push_back(LlamaBlock(attention, c.mlp_width, c.norm_eps));
  norm = register_module("norm", RMSNorm(c.width, c.norm_eps));
  lm_head = register_module("lm_head", Linear(c.width, c.vocab_size, LinearOptions{.bias = false}));
  if (c.tie_weights) {
    lm_head->replace_tensor("weight", embed_tokens->weight);
    lm_head->weight = embed_tokens->weight;
  }
  init_weights();
}

void LlamaImpl::init_weights() {
  NoGradGuard no_grad;
  for (auto& [name, p] : named_parameters()) {
    if (p.dim() == 1)
      p.fill_(1.0f);  // the RMSNorm weights: Llama's Linears have no bias
    else
      p.copy_(randn(p.shape()) * 0.02f);
  }
}

Tensor LlamaImpl::forward(const Tensor& idx) {
  if (idx.dim() != 2)
    throw std::invalid_argument("Llama: expected token ids [B, T], got shape " +
                                to_string(idx.shape()));
  if (idx.size(1) > config_.context_length)
    throw std::invalid_argument("Llama: sequence length " + std::to_string(idx.size(1)) +
                                " exceeds context_length " +
                                std::to_string(config_.context_length));
  Tensor x = embed_tokens(idx);
  for (const auto& block : *layers) x = (*block)(x);
  return lm_head(norm(x));
}

std::string LlamaImpl::extra_repr() const { return describe(config_); }

}  // namespace tensorplay::nn
