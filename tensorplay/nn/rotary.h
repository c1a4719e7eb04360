// RotaryEmbedding: rotary position embedding (RoPE) of queries and keys, as Llama applies it
// (transformers' LlamaRotaryEmbedding with apply_rotary_pos_emb, the "rotate half" layout).
#pragma once

#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// x [..., T, head_dim] -> x * cos + rotate_half(x) * sin, where for position t < T and channel
/// c < head_dim / 2, both c and c + head_dim / 2 turn by the angle t * theta^(-2c / head_dim), and
/// rotate_half(x) = cat(-x[..., head_dim/2:], x[..., :head_dim/2]). Position t is the row's
/// index along the second-last dimension (queries and keys laid out [B, heads, T, head_dim]).
///
/// Buffers `cos` and `sin` [context_length, head_dim], non-persistent (derived, so not part of
/// state_dict, as in transformers), computed as transformers does in float32: inverse
/// frequencies 1 / theta^(2c / head_dim), angles t * inverse frequency, then cos and sin.
class RotaryEmbeddingImpl : public Module {
 public:
  /// Throws std::invalid_argument unless head_dim is even and positive, context_length > 0 and
  /// theta > 0.
  RotaryEmbeddingImpl(int64_t head_dim, int64_t context_length, float theta = 10000.0f);
  /// Throws std::invalid_argument when x is not [..., T, head_dim] (or, with time_dim 1,
  /// [B, T, ..., head_dim]) with T <= context_length.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "RotaryEmbedding"; }
  std::string extra_repr() const override;

  /// The dimension of the input that indexes positions: -2 for [..., T, head_dim] (heads first,
  /// the default), 1 for [B, T, heads, head_dim] (tokens first, as a projection writes them).
  int64_t time_dim = -2;
  Tensor cos;  // buffer [context_length, head_dim]
  Tensor sin;  // buffer [context_length, head_dim]
  int64_t head_dim, context_length;
  float theta;
};
TENSORPLAY_MODULE(RotaryEmbedding);

}  // namespace tensorplay::nn
