// Elementwise nonlinearities and functions (relu, gelu in its tanh form, tanh, exp, log, sqrt,
// square, sigmoid), each with its derivative.
#pragma once

#include "tensorplay/core/tensor.h"

namespace tensorplay {

Tensor relu(const Tensor& x);
/// GELU, tanh approximation (as GPT-2 and PyTorch's approximate="tanh").
Tensor gelu(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor square(const Tensor& x);
/// 1 / (1 + exp(-x)).
Tensor sigmoid(const Tensor& x);

}  // namespace tensorplay
