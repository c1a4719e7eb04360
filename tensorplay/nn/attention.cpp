// Causal self-attention module.
#include "tensorplay/nn/attention.h"

#include <stdexcept>

#include "tensorplay/core/ops/attention.h"

namespace tensorplay::nn {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t width_, int64_t heads_, float dropout)
    : width(width_), heads(heads_) {
  if (width <= 0 || heads <= 0 || width % heads != 0)
    throw std::invalid_argument("CausalSelfAttention: heads (" + std::to_string(heads) +
                                ") must divide width (" + std::to_string(width) + ")");
  c_attn = register_module("c_attn", Linear(width, 3 * width));
  c_proj = register_module("c_proj", Linear(width, width));
  resid_dropout = register_module("resid_dropout", Dropout(dropout));
}

Tensor CausalSelfAttentionImpl::forward(const Tensor& x) {
  if (x.dim() != 3 || x.size(2) != width)
    throw std::invalid_argument("CausalSelfAttention: expected input [B, T, " +
                                std::to_string(width) + "], got " + to_string(x.shape()));
  const int64_t head_dim = width / heads;
  // The attention reads the heads where the projection wrote them ([B, T, 3, H, D]) and writes
  // its output as [B, T, H, D]: no permute either way. The batch size stays -1 so that a traced
  // stage replays on microbatches of any size. The heads are counted from the projection's
  // output: under tensor parallelism c_attn holds this rank's share of them.
  // The sequence too is read from the projection's output: under sequence parallelism x holds
  // this rank's positions and the projection gathers them all.
  Tensor packed = c_attn(x);
  const int64_t time = packed.size(1), local_heads = packed.size(-1) / (3 * head_dim);
  Tensor qkv = packed.reshape({-1, time, 3, local_heads, head_dim});
  Tensor y = scaled_dot_product_attention_qkvpacked(qkv, /*causal=*/true);
  return resid_dropout(c_proj(y.reshape({-1, time, local_heads * head_dim})));
}

std::string CausalSelfAttentionImpl::extra_repr() const {
  return "width=" + std::to_string(width) + ", heads=" + std::to_string(heads);
}

}  // namespace tensorplay::nn
