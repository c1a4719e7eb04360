// Losses, composed from the elementwise and reduction ops so their gradients come for free.
#include "tensorplay/core/ops/loss.h"

#include <stdexcept>

#include "tensorplay/core/ops/activation.h"
#include "tensorplay/core/ops/elementwise.h"
#include "tensorplay/core/ops/reduction.h"

namespace tensorplay {

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (!input.defined() || !target.defined())
    throw std::invalid_argument("mse_loss: input and target must be defined tensors");
  if (input.shape() != target.shape())
    throw std::invalid_argument("mse_loss: input shape " + to_string(input.shape()) +
                                " differs from target shape " + to_string(target.shape()));
  Tensor sq = square(input - target.detach());
  switch (reduction) {
    case Reduction::Mean:
      return mean(sq);
    case Reduction::Sum:
      return sum(sq);
    case Reduction::None:
      return sq;
  }
  return sq;
}

}  // namespace tensorplay
