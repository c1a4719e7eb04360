// RowwiseParallel: a Linear split by input features (Megatron's row-parallel layer), as
// PyTorch's RowwiseParallel.
#pragma once

#include <string>

#include "tensorplay/distributed/tensor_parallel/parallel_style.h"
#include "tensorplay/distributed/tensor_parallel/placement.h"

namespace tensorplay::distributed::tensor_parallel {

/// Options of RowwiseParallel (PyTorch's keyword arguments).
struct RowwiseParallelOptions {
  /// How the input arrives: Shard(-1) (this rank's features, as a ColwiseParallel leaves them)
  /// or Replicate() (this rank's chunk taken, its gradient all-gathered).
  Placement input_layouts = Shard{-1};
  /// How the output leaves: Replicate() (all-reduced) or Shard(d) (reduce-scattered along d:
  /// sequence parallelism).
  Placement output_layouts = Replicate();
  /// PyTorch returns a DTensor when false; tensorplay has none, so it must stay true.
  bool use_local_output = true;
};

/// Shards a Linear's weight along the input features: rank r keeps columns
/// [r in/tp, (r+1) in/tp) and `in_features` becomes in/tp. The partial products are summed
/// across the group; the bias (kept whole on every rank, and still registered under its name)
/// is added once, after the sum (under Shard(d) output its gradient is summed across the group,
/// each rank having seen its own positions).
///
/// On an Embedding (vocabulary parallel, as PyTorch's RowwiseParallel on nn.Embedding): rank r
/// keeps rows [r num/tp, (r+1) num/tp) and `num` becomes num/tp; the ids come replicated
/// (input_layouts is not read), each rank looks up those in its rows (zeros for the others), and
/// the lookups are summed (or reduce-scattered). A Linear tied to the table (a language-model
/// head) becomes its ColwiseParallel counterpart.
class RowwiseParallel : public ParallelStyle {
 public:
  explicit RowwiseParallel(RowwiseParallelOptions options = {}) : options_(options) {}
  std::string describe() const override;
  void check(const nn::Module& module, const std::string& path,
             const ProcessGroup& tp) const override;
  void apply(nn::Module& module, const std::string& path, const ProcessGroup& tp) const override;
  const RowwiseParallelOptions& options() const { return options_; }

 private:
  RowwiseParallelOptions options_;
};

}  // namespace tensorplay::distributed::tensor_parallel
