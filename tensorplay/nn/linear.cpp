// Linear layer.
#include "tensorplay/nn/linear.h"

#include <cmath>
#include <stdexcept>

#include "tensorplay/core/ops/linear_algebra.h"
#include "tensorplay/core/random.h"

namespace tensorplay::nn {

LinearImpl::LinearImpl(int64_t in, int64_t out, LinearOptions options)
    : in_features(in), out_features(out) {
  if (in <= 0 || out <= 0)
    throw std::invalid_argument("Linear: features must be positive, got in=" + std::to_string(in) +
                                ", out=" + std::to_string(out));
  float bound = 1.0f / std::sqrt(static_cast<float>(in));
  weight = register_parameter("weight", rand_uniform({out, in}, -bound, bound));
  if (options.bias) bias = register_parameter("bias", rand_uniform({out}, -bound, bound));
}

Tensor LinearImpl::forward(const Tensor& x) { return linear(x, weight, bias); }

std::string LinearImpl::extra_repr() const {
  return "in_features=" + std::to_string(in_features) +
         ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "true" : "false");
}

}  // namespace tensorplay::nn
