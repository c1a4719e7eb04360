// The collectives tensor parallelism runs, on tensors along one dimension, over the process
// group's all-reduce, all-gather and reduce-scatter.
#pragma once

#include <cstdint>
#include <vector>

#include "tensorplay/core/tensor.h"
#include "tensorplay/distributed/process_group.h"

namespace tensorplay::distributed::tensor_parallel::detail {

/// The collectives run on this thread since the last reset: calls, payload bytes (each call's
/// input tensor), seconds spent in them.
struct Counters {
  int64_t calls = 0;
  int64_t bytes = 0;
  double seconds = 0.0;
};
Counters& thread_counters();

/// The sum of `x` over the group's members (a new tensor; `x` is left alone).
Tensor all_reduce_sum(const ProcessGroup& group, const Tensor& x);
/// Every member's `x` concatenated along `dim`, in group rank order.
Tensor all_gather_dim(const ProcessGroup& group, const Tensor& x, int64_t dim);
/// Every member's `x` (any shape), by group rank.
std::vector<Tensor> all_gather_pieces(const ProcessGroup& group, const Tensor& x);
/// The sum over the members, cut in group-size chunks along `dim`: this member's chunk.
Tensor reduce_scatter_dim(const ProcessGroup& group, const Tensor& x, int64_t dim);
/// This member's chunk of `x` along `dim` (no communication). The size must divide evenly.
Tensor local_chunk(const ProcessGroup& group, const Tensor& x, int64_t dim);

}  // namespace tensorplay::distributed::tensor_parallel::detail
