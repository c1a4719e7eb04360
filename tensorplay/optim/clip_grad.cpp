// Global-norm gradient clipping.
#include "tensorplay/optim/clip_grad.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/ops/activation.h"
#include "tensorplay/core/ops/elementwise.h"
#include "tensorplay/core/ops/reduction.h"
#include "tensorplay/core/ops/shape_ops.h"

namespace tensorplay::optim {

float clip_grad_norm(const std::vector<Tensor>& parameters, float max_norm) {
  if (!(max_norm >= 0))
    throw std::invalid_argument("clip_grad_norm: max_norm must be >= 0, got " +
                                std::to_string(max_norm));
  NoGradGuard no_grad;
  double total_sq = 0.0;  // the sum is kept in double: thousands of terms of very different sizes
  std::vector<Tensor> grads;
  // Sums of squares of the other gradients (on a GPU, or bfloat16), one per parameter, grouped by
  // device and read back once per device rather than once per parameter (a host sync each).
  std::vector<std::pair<Device, std::vector<Tensor>>> pending;
  for (const Tensor& p : parameters) {
    Tensor g = p.defined() ? p.grad() : Tensor();
    if (!g.defined()) continue;
    grads.push_back(g);
    if (g.device().is_cpu() && g.dtype() == DType::Float32) {
      const float* d = g.data<float>();
      for (int64_t i = 0, n = g.numel(); i < n; ++i) total_sq += static_cast<double>(d[i]) * d[i];
    } else {
      Tensor partial = reshape(sum(square(g.detach().to(DType::Float32))), {1});
      auto group = std::find_if(pending.begin(), pending.end(),
                                [&](const auto& e) { return e.first == g.device(); });
      if (group == pending.end()) group = pending.insert(pending.end(), {g.device(), {}});
      group->second.push_back(partial);
    }
  }
  for (auto& [device, partials] : pending)
    for (float v : cat(partials, 0).to_vector()) total_sq += static_cast<double>(v);
  float total = static_cast<float>(std::sqrt(total_sq));
  float coef = max_norm / (total + 1e-6f);
  // As in PyTorch, a NaN or infinite norm is not a reason to skip clipping: the NaN coefficient
  // reaches every gradient (so the step visibly fails) instead of leaving them unclipped.
  if (!(coef >= 1.0f)) {
    for (Tensor& g : grads) {
      if (g.device().is_cpu() && g.dtype() == DType::Float32) {
        float* d = g.data<float>();
        for (int64_t i = 0, n = g.numel(); i < n; ++i) d[i] *= coef;
      } else {
        g.copy_(g.detach() * coef);
      }
    }
  }
  return total;
}

}  // namespace tensorplay::optim
