// ReplicatedColwise: a Linear kept whole on every rank whose output's columns are cut in fewer
// pieces than ranks (grouped-query attention's key-value heads when tp exceeds them).
#pragma once

#include <cstdint>
#include <string>

#include "tensorplay/distributed/tensor_parallel/parallel_style.h"
#include "tensorplay/distributed/tensor_parallel/placement.h"

namespace tensorplay::distributed::tensor_parallel {

/// Keeps the Linear whole; its output's last dimension is cut in `pieces` equal pieces (pieces
/// dividing tp), and rank r keeps piece r / (tp / pieces): tp / pieces ranks share each piece.
/// The output's gradient is summed across the group before the weight's, so the replicated
/// weight gets the whole gradient on every rank. The input needs no collective: the gradient it
/// gets through this module is whole already. An input sharded along the sequence
/// (`input_layouts` Shard(d), sequence parallelism) is all-gathered, its gradient chunked. Not a
/// PyTorch style (PyTorch asks tp to divide the key-value heads).
class ReplicatedColwise : public ParallelStyle {
 public:
  explicit ReplicatedColwise(int64_t pieces, Placement input_layouts = Replicate())
      : pieces_(pieces), input_layouts_(input_layouts) {}
  std::string describe() const override;
  void check(const nn::Module& module, const std::string& path,
             const ProcessGroup& tp) const override;
  void apply(nn::Module& module, const std::string& path, const ProcessGroup& tp) const override;
  int64_t pieces() const { return pieces_; }

 private:
  int64_t pieces_;
  Placement input_layouts_;
};

}  // namespace tensorplay::distributed::tensor_parallel
