// Matrix products: matmul (2-D, a stack of rows times a matrix, or batched), and linear
// (x W^T + b). Products run through BLAS on the CPU and cuBLAS on CUDA.
#pragma once

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// a [..., m, k] x b [k, n] -> [..., m, n]; or batched a [B..., m, k] x b [B..., k, n].
Tensor matmul(const Tensor& a, const Tensor& b);
/// Batched product a [B, m, k] x b [B, k, n] -> [B, m, n] (matmul restricted to rank 3).
Tensor bmm(const Tensor& a, const Tensor& b);
/// x [..., in] W[out, in]^T + bias[out] (bias may be undefined).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace tensorplay
