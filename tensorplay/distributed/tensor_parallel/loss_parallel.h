// Loss parallel: cross-entropy over logits whose vocabulary is split across the tp group,
// without gathering them (torchtitan's loss_parallel, Megatron's vocab_parallel_cross_entropy).
#pragma once

#include <cstdint>

#include "tensorplay/core/tensor.h"
#include "tensorplay/distributed/process_group.h"

namespace tensorplay::distributed::tensor_parallel {

/// Mean cross entropy of `local_logits` [N, V/tp], this rank's columns [r V/tp, (r+1) V/tp) of
/// the logits (as a ColwiseParallel head with output Shard(-1) leaves them), against class ids
/// `targets` [N] (float32 holding integers, the same on every rank; no gradient). Equals
/// cross_entropy of the gathered logits within float32 rounding; rows whose target is
/// `ignore_index` are skipped as there. Moves 3 N floats per rank forward (the rows' maxima,
/// then their sums of exponentials and target logits), nothing backward. Computes on the host.
/// Throws std::invalid_argument naming a target outside [0, V) or a shape that is not [N, C]
/// with [N] targets.
Tensor vocab_parallel_cross_entropy(const Tensor& local_logits, const Tensor& targets,
                                    const ProcessGroup& tp, int64_t ignore_index = -100);

}  // namespace tensorplay::distributed::tensor_parallel
