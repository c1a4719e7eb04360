// Autograd-aware collectives of tensor parallelism (Megatron-LM's f and g and their kin): each
// records a node whose backward runs the transpose of its forward collective.
#pragma once

#include <cstdint>

#include "tensorplay/core/tensor.h"
#include "tensorplay/distributed/process_group.h"

namespace tensorplay::distributed::tensor_parallel {

/// Identity forward, all-reduce backward (Megatron's f): a replicated value entering work split
/// across the group, whose members each hold a part of its gradient.
Tensor copy_to_parallel_region(const Tensor& x, const ProcessGroup& tp);
/// All-reduce forward, identity backward (Megatron's g): partial sums leaving split work as one
/// replicated value.
Tensor reduce_from_parallel_region(const Tensor& x, const ProcessGroup& tp);
/// All-gather along `dim` forward, this rank's chunk of the gradient backward: shards made
/// whole for replicated work (whose gradient is the same on every member).
Tensor gather_from_parallel_region(const Tensor& x, int64_t dim, const ProcessGroup& tp);
/// This rank's chunk along `dim` forward, all-gather backward: the transpose of the above.
Tensor scatter_to_parallel_region(const Tensor& x, int64_t dim, const ProcessGroup& tp);
/// All-gather along `dim` forward, reduce-scatter backward: shards made whole for split work
/// (whose gradient each member holds a part of), as at a sequence-parallel boundary.
Tensor all_gather(const Tensor& x, int64_t dim, const ProcessGroup& tp);
/// Reduce-scatter along `dim` forward, all-gather backward: the transpose of all_gather.
Tensor reduce_scatter(const Tensor& x, int64_t dim, const ProcessGroup& tp);

/// What the collectives above (and vocab_parallel_cross_entropy's) did on this thread since the
/// last reset: calls, payload bytes (the bytes of each call's input tensor on this rank), and
/// seconds spent waiting in them. A reduce-scatter counts as its all-reduce.
struct CollectiveFigures {
  int64_t calls = 0;
  int64_t bytes = 0;
  double seconds = 0.0;
};
CollectiveFigures collective_figures();
void reset_collective_figures();

}  // namespace tensorplay::distributed::tensor_parallel
