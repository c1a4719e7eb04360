// Embedding module.
#include "tensorplay/nn/embedding.h"

#include <stdexcept>

#include "tensorplay/core/ops/embedding.h"
#include "tensorplay/core/random.h"

namespace tensorplay::nn {

EmbeddingImpl::EmbeddingImpl(int64_t num_, int64_t dim_) : num(num_), dim(dim_) {
  if (num <= 0 || dim <= 0)
    throw std::invalid_argument("Embedding: num and dim must be positive, got num=" +
                                std::to_string(num) + ", dim=" + std::to_string(dim));
  weight = register_parameter("weight", randn({num, dim}));
}

Tensor EmbeddingImpl::forward(const Tensor& ids) { return embedding(ids, weight); }

std::string EmbeddingImpl::extra_repr() const {
  return std::to_string(num) + ", " + std::to_string(dim);
}

}  // namespace tensorplay::nn
