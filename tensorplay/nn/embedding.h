// Embedding: a table of `num` learned vectors of size `dim`, looked up by integer ids, as
// torch.nn.Embedding(num, dim).
#pragma once

#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// ids [...] (float32 holding integers) -> [..., dim]. Parameter `weight` [num, dim], initialised
/// from N(0, 1) as PyTorch does.
class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(int64_t num, int64_t dim);
  Tensor forward(const Tensor& ids) override;
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;

  Tensor weight;
  int64_t num, dim;
};
TENSORPLAY_MODULE(Embedding);

}  // namespace tensorplay::nn
