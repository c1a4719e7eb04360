// SequenceParallel: a norm or dropout run on this rank's positions of the sequence, as PyTorch's
// SequenceParallel (Megatron-LM's sequence parallelism).
#pragma once

#include <cstdint>
#include <string>

#include "tensorplay/distributed/tensor_parallel/parallel_style.h"

namespace tensorplay::distributed::tensor_parallel {

/// Runs a LayerNorm, RMSNorm or Dropout (or any module without parameters) on the sequence shard
/// it is given: the input is expected sharded along `sequence_dim` already (a RowwiseParallel
/// with output_layouts Shard(1) before it, a ColwiseParallel with input_layouts Shard(1) after
/// it, or PrepareModuleInput), and the output stays so. The norm's weights stay whole on every
/// rank; their gradients, computed from this rank's positions only, are summed across the group
/// in the backward. Outputs are local tensors (PyTorch's use_local_output=false has no DTensor
/// to return here).
class SequenceParallel : public ParallelStyle {
 public:
  explicit SequenceParallel(int64_t sequence_dim = 1) : sequence_dim_(sequence_dim) {}
  std::string describe() const override;
  void check(const nn::Module& module, const std::string& path,
             const ProcessGroup& tp) const override;
  void apply(nn::Module& module, const std::string& path, const ProcessGroup& tp) const override;

 private:
  int64_t sequence_dim_;
};

}  // namespace tensorplay::distributed::tensor_parallel
