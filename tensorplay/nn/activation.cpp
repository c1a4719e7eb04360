// Activation modules.
#include "tensorplay/nn/activation.h"

#include "tensorplay/core/ops/activation.h"

namespace tensorplay::nn {

Tensor ReLUImpl::forward(const Tensor& x) { return relu(x); }
Tensor GELUImpl::forward(const Tensor& x) { return gelu(x); }
Tensor TanhImpl::forward(const Tensor& x) { return tanh(x); }

}  // namespace tensorplay::nn
