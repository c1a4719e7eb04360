// RMSNorm module over the fused rms_norm op.
#include "tensorplay/nn/rms_norm.h"

#include <stdexcept>

#include "tensorplay/core/ops/rms_norm.h"

namespace tensorplay::nn {

RMSNormImpl::RMSNormImpl(int64_t dim_, float eps_) : dim(dim_), eps(eps_) {
  if (dim <= 0)
    throw std::invalid_argument("RMSNorm: dim must be positive, got " + std::to_string(dim));
  if (!(eps >= 0.0f))
    throw std::invalid_argument("RMSNorm: eps must be >= 0, got " + std::to_string(eps));
  weight = register_parameter("weight", ones({dim}));
}

Tensor RMSNormImpl::forward(const Tensor& x) {
  if (x.dim() == 0 || x.size(-1) != dim)
    throw std::invalid_argument("RMSNorm: expected input [..., " + std::to_string(dim) + "], got " +
                                to_string(x.shape()));
  return rms_norm(x, dim, weight, eps);
}

std::string RMSNormImpl::extra_repr() const {
  return std::to_string(dim) + ", eps=" + std::to_string(eps);
}

}  // namespace tensorplay::nn
