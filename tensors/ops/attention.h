// Scaled dot-product attention as one op with its own backward.
#pragma once

#include "tensors/tensor.h"

namespace tensorplay {

/// softmax(q k^T / sqrt(D) + mask) v for q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv]
/// (any equal leading dimensions). With `causal`, query i attends to keys j <= i (top-left
/// aligned, as PyTorch's is_causal). Output [B, H, Tq, Dv].
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal);

}  // namespace tensorplay
