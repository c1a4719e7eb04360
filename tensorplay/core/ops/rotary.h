// Rotary position embedding applied as one op (Llama's "rotate half" layout), one sweep each way.
#pragma once

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// x * cos + rotate_half(x) * sin for x [..., T, D] (D even) and tables cos, sin [T, D], where
/// rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]) (transformers' apply_rotary_pos_emb). The
/// tables are constants: they must not require a gradient. The input gradient is the adjoint
/// rotation of the output gradient, one sweep. bfloat16 runs in float32 and rounds once. On
/// devices without the fused kernels (CUDA) it runs as the composed ops. `time_dim` is the
/// dimension that indexes positions: -2 for [..., T, D] (heads first, [B, H, T, D]), 1 for
/// [B, T, H, D] (tokens first, as a projection writes them).
Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin,
                        int64_t time_dim = -2);

}  // namespace tensorplay
