// Transformer feed-forward module.
#include "tensorplay/nn/mlp.h"

namespace tensorplay::nn {

MLPImpl::MLPImpl(int64_t width, float p) {
  c_fc = register_module("c_fc", Linear(width, 4 * width));
  gelu = register_module("gelu", GELU());
  c_proj = register_module("c_proj", Linear(4 * width, width));
  dropout = register_module("dropout", Dropout(p));
}

Tensor MLPImpl::forward(const Tensor& x) { return dropout(c_proj(gelu(c_fc(x)))); }

}  // namespace tensorplay::nn
