// Dropout module.
#include "tensorplay/nn/dropout.h"

#include <stdexcept>

#include "tensorplay/core/ops/dropout.h"

namespace tensorplay::nn {

DropoutImpl::DropoutImpl(float p_) : p(p_) {
  if (!(p >= 0.0f && p <= 1.0f))
    throw std::invalid_argument("Dropout: p must be in [0, 1], got " + std::to_string(p));
}

Tensor DropoutImpl::forward(const Tensor& x) { return dropout(x, p, is_training(), generator_); }

std::string DropoutImpl::extra_repr() const { return "p=" + std::to_string(p); }

}  // namespace tensorplay::nn
