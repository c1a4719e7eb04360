// MLP: the transformer's position-wise feed-forward network (GPT-2's `mlp`): expand to four
// times the width, GELU, project back.
#pragma once

#include "tensorplay/nn/activation.h"
#include "tensorplay/nn/dropout.h"
#include "tensorplay/nn/linear.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// x [..., width] -> dropout(c_proj(gelu(c_fc(x)))). Children: `c_fc` Linear(width, 4 width),
/// `gelu` GELU (tanh form, as GPT-2), `c_proj` Linear(4 width, width), `dropout` Dropout.
class MLPImpl : public Module {
 public:
  explicit MLPImpl(int64_t width, float dropout = 0.0f);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MLP"; }

  Linear c_fc{nullptr};
  GELU gelu{nullptr};
  Linear c_proj{nullptr};
  Dropout dropout{nullptr};
};
TENSORPLAY_MODULE(MLP);

}  // namespace tensorplay::nn
