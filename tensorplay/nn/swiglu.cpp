// SwiGLU feed-forward module: three linear maps around the fused silu_mul op.
#include "tensorplay/nn/swiglu.h"

#include <stdexcept>

#include "tensorplay/core/ops/silu_mul.h"

namespace tensorplay::nn {

SwiGLUImpl::SwiGLUImpl(int64_t width_, int64_t hidden_) : width(width_), hidden(hidden_) {
  if (width <= 0 || hidden <= 0)
    throw std::invalid_argument("SwiGLU: width and hidden must be positive, got width=" +
                                std::to_string(width) + ", hidden=" + std::to_string(hidden));
  gate_proj = register_module("gate_proj", Linear(width, hidden, LinearOptions{.bias = false}));
  up_proj = register_module("up_proj", Linear(width, hidden, LinearOptions{.bias = false}));
  down_proj = register_module("down_proj", Linear(hidden, width, LinearOptions{.bias = false}));
}

Tensor SwiGLUImpl::forward(const Tensor& x) {
  if (x.dim() == 0 || x.size(-1) != width)
    throw std::invalid_argument("SwiGLU: expected input [..., " + std::to_string(width) +
                                "], got " + to_string(x.shape()));
  return down_proj(silu_mul(gate_proj(x), up_proj(x)));
}

std::string SwiGLUImpl::extra_repr() const {
  return "width=" + std::to_string(width) + ", hidden=" + std::to_string(hidden);
}

}  // namespace tensorplay::nn
