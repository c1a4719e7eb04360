// Dropout: zeroes activations at random while training (scaling the rest by 1/(1-p)) and is the
// identity in eval mode, as torch.nn.Dropout(p).
#pragma once

#include "tensorplay/core/random.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// Random zeroing with probability `p` in training mode; identity in eval mode or when p == 0.
class DropoutImpl : public Module {
 public:
  /// Throws std::invalid_argument unless 0 <= p <= 1.
  explicit DropoutImpl(float p = 0.5f);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  /// Draws masks from `generator` (which must outlive the module and any trace of it) instead of
  /// the default generator; null goes back to the default.
  void set_generator(Generator* generator) { generator_ = generator; }

  float p;

 private:
  Generator* generator_ = nullptr;
};
TENSORPLAY_MODULE(Dropout);

}  // namespace tensorplay::nn
