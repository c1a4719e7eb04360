// SwiGLU: the gated feed-forward network of Llama-style models (transformers' LlamaMLP), with
// transformers' child names so a checkpoint maps name for name.
#pragma once

#include "tensorplay/nn/linear.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// x [..., width] -> down_proj(silu(gate_proj(x)) * up_proj(x)), silu(g) = g * sigmoid(g).
/// Children, in order: `gate_proj` Linear(width, hidden), `up_proj` Linear(width, hidden),
/// `down_proj` Linear(hidden, width), none with a bias.
class SwiGLUImpl : public Module {
 public:
  /// Throws std::invalid_argument unless width and hidden are positive.
  SwiGLUImpl(int64_t width, int64_t hidden);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "SwiGLU"; }
  std::string extra_repr() const override;

  Linear gate_proj{nullptr};
  Linear up_proj{nullptr};
  Linear down_proj{nullptr};
  int64_t width, hidden;
};
TENSORPLAY_MODULE(SwiGLU);

}  // namespace tensorplay::nn
