// Clipping a tensor-parallel model's gradients: split parameters' squares summed over the group.
#include "tensorplay/distributed/tensor_parallel/clip_grad_norm.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/core/ops/activation.h"
#include "tensorplay/core/ops/elementwise.h"
#include "tensorplay/core/ops/reduction.h"
#include "tensorplay/distributed/tensor_parallel/detail/shard.h"
#include "tensorplay/distributed/tensor_parallel/detail/tp_collectives.h"

namespace tensorplay::distributed::tensor_parallel {

float clip_grad_norm(const std::vector<Tensor>& parameters, float max_norm,
                     const ProcessGroup& tp) {
  if (!(max_norm >= 0))
    throw std::invalid_argument("clip_grad_norm: max_norm must be >= 0, got " +
                                std::to_string(max_norm));
  autograd::NoGradGuard no_grad;
  // [split, whole]: the split parameters' squares are summed over the group, the whole ones'
  // are the same on every member.
  double squares[2] = {0.0, 0.0};
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) {
    Tensor g = p.defined() ? p.grad() : Tensor();
    if (!g.defined()) continue;
    grads.push_back(g);
    const auto spec = detail::shard_spec_of(p);
    const bool split = spec.has_value() && spec->count == tp.size() && tp.size() > 1;
    squares[split ? 0 : 1] += sum(square(g.detach().to(DType::Float32))).item();
  }
  const Tensor split_sum =
      detail::all_reduce_sum(tp, from_vector({static_cast<float>(squares[0])}, {1}));
  const double total_sq = static_cast<double>(split_sum.item()) + squares[1];
  const float total = static_cast<float>(std::sqrt(total_sq));
  const float coef = max_norm / (total + 1e-6f);
  if (!(coef >= 1.0f))
    for (Tensor& g : grads) g.copy_(g.detach() * coef);
  return total;
}

}  // namespace tensorplay::distributed::tensor_parallel
