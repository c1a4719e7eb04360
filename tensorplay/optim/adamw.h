// AdamW: Adam with decoupled weight decay, following PyTorch's torch.optim.AdamW (single-tensor
// path) operation for operation.
#pragma once

#include <cstdint>

#include "tensorplay/optim/optimizer.h"

namespace tensorplay::optim {

/// AdamW hyper-parameters (PyTorch's defaults).
struct AdamWOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 1e-2f;
};

/// Per parameter p with gradient g, on its t-th update (t counted per parameter from 1):
///   p  = p * (1 - lr * weight_decay)
///   m  = m + (1 - beta1) * (g - m)                  (PyTorch's lerp form of beta1 m + (1-beta1) g)
///   v  = beta2 * v + (1 - beta2) * g * g
///   p  = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// m and v start at zero; bias corrections are computed in double, as PyTorch does. m and v have
/// the parameter's dtype; for bfloat16 parameters each operation computes in float32 and rounds,
/// as PyTorch's bfloat16 AdamW does.
class AdamW : public Optimizer {
 public:
  /// Throws std::invalid_argument on lr < 0, eps < 0, betas outside [0, 1), weight_decay < 0.
  AdamW(std::vector<Tensor> parameters, AdamWOptions options = {});
  void step() override;
  std::string type_name() const override { return "AdamW"; }
  const AdamWOptions& options() const { return options_; }
  AdamWOptions& options() { return options_; }
  /// Updates made to parameter i so far.
  int64_t step_count(size_t i) const { return steps_.at(i); }

  /// Keys: options.{lr,beta1,beta2,eps,weight_decay}; per updated parameter
  /// `state.<i>.step` (float32 scalar), `state.<i>.exp_avg`, `state.<i>.exp_avg_sq`.
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& dict) override;

 private:
  void step_host(size_t i, const Tensor& grad);
  void step_device(size_t i, const Tensor& grad);

  AdamWOptions options_;
  std::vector<int64_t> steps_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

}  // namespace tensorplay::optim
