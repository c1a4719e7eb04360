// SGD update, run as kernels on the parameters' device.
#include "tensors/optim/sgd.h"

#include "tensors/autograd/grad_mode.h"
#include "tensors/ops/elementwise.h"

namespace tensorplay::optim {

SGD::SGD(std::vector<Tensor> parameters, SGDOptions options)
    : Optimizer(std::move(parameters)), options_(options), momentum_buffers_(parameters_.size()) {}

void SGD::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& p = parameters_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (options_.weight_decay != 0.0f) g = g + p.detach() * options_.weight_decay;
    if (options_.momentum != 0.0f) {
      Tensor& buf = momentum_buffers_[i];
      buf = buf.defined() ? buf * options_.momentum + g : g.clone();
      g = buf;
    }
    p.copy_(p.detach() - g * options_.lr);
  }
}

}  // namespace tensorplay::optim
