// SwiGLU's gated product silu(gate) * up as one op (one sweep forward, one backward).
#pragma once

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// silu(gate) * up = gate * sigmoid(gate) * up, elementwise; gate and up must have the same
/// shape, device and dtype. Gradients of gate and up come from one kernel, each computed only
/// when requested. bfloat16 runs in float32 and rounds once. On devices without the fused
/// kernels (CUDA) it runs as the composed ops (gate * sigmoid(gate) * up).
Tensor silu_mul(const Tensor& gate, const Tensor& up);

}  // namespace tensorplay
