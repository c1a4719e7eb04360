// RMS normalisation over the last dimension (Llama's RMSNorm), one fused kernel each way.
#pragma once

#include <cstdint>

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// x / sqrt(mean(x^2) + eps) * weight over the last dimension of x, whose size must be
/// `normalized_size` (computed as x * rsqrt(...) * weight, as transformers' LlamaRMSNorm).
/// weight ([normalized_size]) may be undefined. One sweep forward, one for the input gradient
/// and one for the weight gradient, each computed only when requested (a split backward equals
/// a full one). bfloat16 runs in float32 and rounds once. On devices without the fused kernels
/// (CUDA) it runs as the composed elementwise and reduction ops, with the same values up to
/// float32 rounding.
Tensor rms_norm(const Tensor& x, int64_t normalized_size, const Tensor& weight = Tensor(),
                float eps = 1e-6f);

}  // namespace tensorplay
