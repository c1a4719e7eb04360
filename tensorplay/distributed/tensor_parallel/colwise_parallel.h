// ColwiseParallel: a Linear split by output features (Megatron's column-parallel layer), as
// PyTorch's ColwiseParallel.
#pragma once

#include <cstdint>
#include <string>

#include "tensorplay/distributed/tensor_parallel/parallel_style.h"
#include "tensorplay/distributed/tensor_parallel/placement.h"

namespace tensorplay::distributed::tensor_parallel {

/// Options of ColwiseParallel (PyTorch's keyword arguments, plus `packed`).
struct ColwiseParallelOptions {
  /// How the input arrives: Replicate() (identity forward, all-reduce of its gradient) or
  /// Shard(d) (all-gathered along d, its gradient reduce-scattered: sequence parallelism).
  Placement input_layouts = Replicate();
  /// How the output leaves: Shard(-1) (this rank's features) or Replicate() (all-gathered).
  Placement output_layouts = Shard{-1};
  /// PyTorch returns a DTensor when false; tensorplay has none, so it must stay true.
  bool use_local_output = true;
  /// The output holds `packed` equal parts side by side (GPT's fused q, k, v: 3), each split
  /// across the ranks; a departure from PyTorch, whose models keep q, k and v apart.
  int64_t packed = 1;
  /// With input_layouts Shard(d): keep only this rank's shard of the input for the backward, and
  /// gather it again there, by running the layer under recomputation (autograd::checkpoint: its
  /// all-gather and product run again in the backward). Less memory, one more product. Not a
  /// PyTorch option (Megatron-LM keeps the shard too, without the second product).
  bool keep_input_shard = false;
};

/// Shards a Linear's weight (and bias) along the output features: rank r keeps rows
/// [r out/tp, (r+1) out/tp) (of each packed part), and `out_features` becomes out/tp.
class ColwiseParallel : public ParallelStyle {
 public:
  explicit ColwiseParallel(ColwiseParallelOptions options = {}) : options_(options) {}
  std::string describe() const override;
  void check(const nn::Module& module, const std::string& path,
             const ProcessGroup& tp) const override;
  void apply(nn::Module& module, const std::string& path, const ProcessGroup& tp) const override;
  const ColwiseParallelOptions& options() const { return options_; }

 private:
  ColwiseParallelOptions options_;
};

}  // namespace tensorplay::distributed::tensor_parallel
