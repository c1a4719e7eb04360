// Fused attention on the host: forward and backward over tiles of queries and keys with an online
// softmax (FlashAttention-2's algorithm), never holding the [t_q, t_k] probability matrix. Internal
// to the tensors layer: cpu_backend.cpp exposes it through the kernel table.
#pragma once

#include <cstdint>

#include "tensorplay/core/backend.h"

namespace tensorplay::cpu_kernels {

/// out = softmax(scale q k^T (+ causal mask)) v for every head `g` lays out; lse
/// [g.batch(), t_q] receives each row's log-sum-exp for the backward. `rows` (elementwise
/// kernels) is the kernel table whose exp and affine run on the tiles.
void flash_attention(const Backend& rows, const AttentionGeometry& g, const float* q,
                     const float* k, const float* v, float* out, float* lse);

/// Gradients gq, gk, gv (each may be null: not computed; laid out as q, k, v) from the output
/// gradient gout (laid out as out), the forward's out and lse, recomputing each probability tile.
void flash_attention_backward(const Backend& rows, const AttentionGeometry& g, const float* q,
                              const float* k, const float* v, const float* out, const float* lse,
                              const float* gout, float* gq, float* gk, float* gv);

}  // namespace tensorplay::cpu_kernels
