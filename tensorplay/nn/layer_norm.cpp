// LayerNorm module.
#include "tensorplay/nn/layer_norm.h"

#include <stdexcept>

#include "tensorplay/core/ops/normalization.h"

namespace tensorplay::nn {

LayerNormImpl::LayerNormImpl(int64_t dim_, float eps_) : dim(dim_), eps(eps_) {
  if (dim <= 0)
    throw std::invalid_argument("LayerNorm: dim must be positive, got " + std::to_string(dim));
  weight = register_parameter("weight", ones({dim}));
  bias = register_parameter("bias", zeros({dim}));
}

Tensor LayerNormImpl::forward(const Tensor& x) { return layer_norm(x, dim, weight, bias, eps); }

std::string LayerNormImpl::extra_repr() const {
  return std::to_string(dim) + ", eps=" + std::to_string(eps);
}

}  // namespace tensorplay::nn
