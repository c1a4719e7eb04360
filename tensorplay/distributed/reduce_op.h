// ReduceOp: how a reducing collective combines the members' values (torch.distributed's
// ReduceOp, the two that sharded data parallelism needs).
#pragma once

namespace tensorplay::distributed {

/// How reduce_scatter_tensor combines the members' chunks.
enum class ReduceOp {
  Sum,  ///< the sum over the members
  Avg,  ///< the sum over the members divided by their count
};

}  // namespace tensorplay::distributed
