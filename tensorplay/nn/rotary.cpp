// Rotary position embedding module: cos and sin tables as transformers computes them, applied
// by the fused rotary_embedding op.
#include "tensorplay/nn/rotary.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "tensorplay/core/ops/rotary.h"

namespace tensorplay::nn {

RotaryEmbeddingImpl::RotaryEmbeddingImpl(int64_t head_dim_, int64_t context_length_, float theta_)
    : head_dim(head_dim_), context_length(context_length_), theta(theta_) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    throw std::invalid_argument("RotaryEmbedding: head_dim must be even and positive, got " +
                                std::to_string(head_dim));
  if (context_length <= 0)
    throw std::invalid_argument("RotaryEmbedding: context_length must be positive, got " +
                                std::to_string(context_length));
  if (!(theta > 0.0f))
    throw std::invalid_argument("RotaryEmbedding: theta must be positive, got " +
                                std::to_string(theta));
  const int64_t half = head_dim / 2;
  // float32 throughout, as transformers: inv_freq = 1 / theta^(arange(0, D, 2) / D), then
  // angles = t * inv_freq, each product rounded to float before cos and sin.
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t c = 0; c < half; ++c)
    inv_freq[c] = 1.0f / std::pow(theta, static_cast<float>(2 * c) / static_cast<float>(head_dim));
  std::vector<float> cos_table(static_cast<size_t>(context_length * head_dim));
  std::vector<float> sin_table(cos_table.size());
  for (int64_t t = 0; t < context_length; ++t)
    for (int64_t c = 0; c < half; ++c) {
      const float angle = static_cast<float>(t) * inv_freq[c];
      const auto cos_value = static_cast<float>(std::cos(static_cast<double>(angle)));
      const auto sin_value = static_cast<float>(std::sin(static_cast<double>(angle)));
      for (int64_t k : {c, c + half}) {
        cos_table[t * head_dim + k] = cos_value;
        sin_table[t * head_dim + k] = sin_value;
      }
    }
  cos = register_buffer("cos", from_vector(cos_table, {context_length, head_dim}),
                        /*persistent=*/false);
  sin = register_buffer("sin", from_vector(sin_table, {context_length, head_dim}),
                        /*persistent=*/false);
}

Tensor RotaryEmbeddingImpl::forward(const Tensor& x) {
  const bool tokens_first = time_dim == 1;
  if (x.dim() < (tokens_first ? 3 : 2) || x.size(-1) != head_dim ||
      x.size(time_dim) > context_length)
    throw std::invalid_argument(
        "RotaryEmbedding: expected input " +
        std::string(tokens_first ? "[B, T, ..., " : "[..., T, ") + std::to_string(head_dim) +
        "] with T <= " + std::to_string(context_length) + ", got " + to_string(x.shape()));
  const int64_t time = x.size(time_dim);
  Tensor c = cos.slice0(0, time), s = sin.slice0(0, time);  // [T, D], broadcast over the rest
  if (c.dtype() != x.dtype()) {
    c = c.to(x.dtype());
    s = s.to(x.dtype());
  }
  return rotary_embedding(x, c, s, time_dim);
}

std::string RotaryEmbeddingImpl::extra_repr() const {
  return "head_dim=" + std::to_string(head_dim) +
         ", context_length=" + std::to_string(context_length) + ", theta=" + std::to_string(theta);
}

}  // namespace tensorplay::nn
