// Tests for nn/llama_block.h: children and names, the output as the two residual steps composed
// from the children, and gradients reaching every parameter.
#include <catch2/catch.hpp>

#include "tensorplay/nn/llama_block.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;

TEST_CASE("LlamaBlock is attention then SwiGLU, each around an RMSNorm and a residual",
          "[llama_block]") {
  tp::manual_seed(51);
  nn::LlamaBlock block(
      nn::GroupedQueryAttentionOptions{.width = 16, .heads = 4, .kv_heads = 2, .context_length = 8},
      24, 1e-5f);
  std::vector<std::string> names;
  for (auto& [n, p] : block->named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"input_layernorm.weight", "self_attn.q_proj.weight",
                                          "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                                          "self_attn.o_proj.weight",
                                          "post_attention_layernorm.weight", "mlp.gate_proj.weight",
                                          "mlp.up_proj.weight", "mlp.down_proj.weight"});
  CHECK(block->input_layernorm->eps == 1e-5f);
  {
    tp::NoGradGuard no_grad;  // norms away from 1, so that each one shows
    for (auto* norm : {&block->input_layernorm, &block->post_attention_layernorm})
      (*norm)->weight.copy_(tp::randn({16}) * 0.3f + 1.0f);
  }
  tp::Tensor x = tp::randn({2, 8, 16}).set_requires_grad(true);
  tp::Tensor y = block(x);
  tp::Tensor h = x + block->self_attn(block->input_layernorm(x));
  tp::Tensor want = h + block->mlp(block->post_attention_layernorm(h));
  CHECK(y.to_vector() == want.to_vector());
  tp::sum(y * y).backward();
  CHECK(x.grad().defined());
  for (auto& [n, p] : block->named_parameters()) {
    INFO(n);
    REQUIRE(p.grad().defined());
    double total = 0;
    for (float g : p.grad().to_vector()) total += std::abs(g);
    CHECK(total > 0);
  }
}
