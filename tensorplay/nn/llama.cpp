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
  if (c.head_dim < 0)
    fail("head_dim must be positive (or 0 for width / n_head), got " + std::to_string(c.head_dim));
  if (c.head_dim == 0 && (c.width % c.n_head != 0 || (c.width / c.n_head) % 2 != 0))
    fail("n_head (" + std::to_string(c.n_head) + ") must divide width (" + std::to_string(c.width) +
         ") into an even head size (rotary positions turn channel pairs), or head_dim must be "
         "given");
  if (c.head_dim % 2 != 0)
    fail("head_dim (" + std::to_string(c.head_dim) +
         ") must be even (rotary positions turn channel pairs)");
  if (c.sliding_window < 0)
    fail("sliding_window must be positive (or 0 for none), got " +
         std::to_string(c.sliding_window));
  if (c.model_type != "llama" && c.model_type != "qwen2" && c.model_type != "qwen3" &&
      c.model_type != "mistral")
    fail("model_type \"" + c.model_type +
         "\" is not one of \"llama\", \"qwen2\", \"qwen3\" and \"mistral\"");
  // What each family's config.json can say (so that every config saves as its family).
  const std::string& t = c.model_type;
  if (t == "qwen2" && (!c.qkv_bias || c.o_bias || c.qk_norm))
    fail("a qwen2 model has biases on q_proj, k_proj and v_proj only and no qk_norm");
  if ((t == "llama" || t == "qwen3") && c.qkv_bias != c.o_bias)
    fail("a " + t +
         " model has biases on all of q_proj, k_proj, v_proj and o_proj or none "
         "(attention_bias)");
  if (t == "mistral" && (c.qkv_bias || c.o_bias)) fail("a mistral model has no attention biases");
  if (c.qk_norm && t != "qwen3") fail("qk_norm belongs to qwen3 models, not " + t);
  if (t == "qwen3" && !c.qk_norm) fail("a qwen3 model has qk_norm");
  if (c.sliding_window > 0 && t != "mistral")
    fail("sliding_window belongs to mistral models, not " + t);
  try {
    check_rotary_scaling(c.rope_scaling);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
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
  if (c.head_dim > 0 && c.width % c.n_head == 0 && c.head_dim == c.width / c.n_head)
    c.head_dim = 0;  // the default, spelled one way (as config.json files read back)
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
         ", tie_weights=" + (c.tie_weights ? "1" : "0") +
         (c.head_dim > 0 ? ", head_dim=" + std::to_string(c.head_dim) : "") +
         (c.qkv_bias ? ", qkv_bias=1" : "") + (c.o_bias ? ", o_bias=1" : "") +
         (c.qk_norm ? ", qk_norm=1" : "") +
         (c.sliding_window > 0 ? ", sliding_window=" + std::to_string(c.sliding_window) : "") +
         (c.rope_scaling.type != "default" ? ", rope_scaling={" + describe(c.rope_scaling) + "}"
                                           : "") +
         (c.model_type != "llama" ? ", model_type=" + c.model_type : "");
}

LlamaImpl::LlamaImpl(LlamaConfig config) : config_(filled_in(config)) {
  const LlamaConfig& c = config_;
  embed_tokens = register_module("embed_tokens", Embedding(c.vocab_size, c.width));
  layers = register_module("layers", ModuleList());
  const GroupedQueryAttentionOptions attention{.width = c.width,
                                               .heads = c.n_head,
                                               .kv_heads = c.n_kv_head,
                                               .context_length = c.context_length,
                                               .rope_theta = c.rope_theta,
                                               .head_dim = c.head_size(),
                                               .qkv_bias = c.qkv_bias,
                                               .o_bias = c.o_bias,
                                               .qk_norm = c.qk_norm,
                                               .norm_eps = c.norm_eps,
                                               .rope_scaling = c.rope_scaling,
                                               .sliding_window = c.sliding_window};
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
    if (name.ends_with(".bias"))
      p.fill_(0.0f);
    else if (p.dim() == 1)
      p.fill_(1.0f);  // the RMSNorm weights
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
