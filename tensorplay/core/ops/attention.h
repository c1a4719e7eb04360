// Scaled dot-product attention as one op with its own backward.
#pragma once

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// Which kernel computes it. Plain: batched products and a row softmax over the whole [Tq, Tk]
/// probability matrix (kept for the backward when smaller than q, k and v together, else
/// recomputed). Fused: tiles with an online softmax that never hold that matrix (host only; the
/// causal mask skips the blocks above the diagonal). Auto: Fused on the host where the matrix
/// would be larger than q, k and v together (long contexts), else Plain.
enum class AttentionKernel { Auto, Plain, Fused };

/// softmax(q k^T / sqrt(D) + mask) v for q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv]
/// (any equal leading dimensions). With `causal`, query i attends to keys j <= i (top-left
/// aligned, as PyTorch's is_causal). Output [B, H, Tq, Dv].
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    AttentionKernel kernel = AttentionKernel::Auto);

/// scaled_dot_product_attention of q = qkv[0], k = qkv[1] and v = qkv[2], for qkv [3, B, H, T, D]
/// (one permute of a fused q, k, v projection gives it). The same values; the gradient of qkv is
/// written in one piece, where slicing qkv would make three zero-padded gradients to add up.
/// bfloat16 takes the sliced form (its backward keeps q, k and v as bfloat16).
Tensor scaled_dot_product_attention_packed(const Tensor& qkv, bool causal,
                                           AttentionKernel kernel = AttentionKernel::Auto);

/// Attention straight from a fused q, k, v projection, with no permute: qkv [B, T, 3, H, D] (the
/// projection's [B, T, 3 * H * D] reshaped; flash-attn's qkvpacked layout) gives out [B, T, H, D],
/// which reshapes to [B, T, H * D] for the output projection. The same values as
/// scaled_dot_product_attention on the permuted heads; the gradient of qkv is written in one
/// piece. bfloat16 goes through the permuted form.
Tensor scaled_dot_product_attention_qkvpacked(const Tensor& qkv, bool causal,
                                              AttentionKernel kernel = AttentionKernel::Auto);

/// Attention of q [B, Tq, H, D], k [B, Tk, H, D] and v [B, Tk, H, Dv] laid out tokens first (as
/// projections write them, flash-attn's layout), with no permute: out [B, Tq, H, Dv]. The same
/// values as scaled_dot_product_attention on the permuted heads.
Tensor scaled_dot_product_attention_tokens_first(const Tensor& q, const Tensor& k, const Tensor& v,
                                                 bool causal,
                                                 AttentionKernel kernel = AttentionKernel::Auto);

}  // namespace tensorplay
