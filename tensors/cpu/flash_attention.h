// Fused attention on the host: forward and backward over tiles of queries and keys with an online
// softmax (FlashAttention-2's algorithm), never holding the [t_q, t_k] probability matrix. Internal
// to tensors/: cpu_backend.cpp exposes it through the kernel table.
#pragma once

#include <cstdint>

#include "tensors/backend.h"

namespace tensorplay::cpu_kernels {

/// out[b] = softmax(scale q[b] k[b]^T (+ causal mask)) v[b] for `batch` contiguous heads; lse
/// [batch, t_q] receives each row's log-sum-exp for the backward. `rows` (elementwise kernels)
/// is the kernel table whose exp and affine run on the tiles.
void flash_attention(const Backend& rows, const float* q, const float* k, const float* v,
                     float* out, float* lse, int64_t batch, int64_t t_q, int64_t t_k, int64_t d,
                     int64_t d_v, float scale, bool causal);

/// Gradients gq, gk, gv (each may be null: not computed) from the output gradient gout, the
/// forward's out and lse, recomputing each probability tile.
void flash_attention_backward(const Backend& rows, const float* q, const float* k, const float* v,
                              const float* out, const float* lse, const float* gout, float* gq,
                              float* gk, float* gv, int64_t batch, int64_t t_q, int64_t t_k,
                              int64_t d, int64_t d_v, float scale, bool causal);

}  // namespace tensorplay::cpu_kernels
