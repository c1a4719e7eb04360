// ParallelStyle: what a plan entry does to one module (shard its parameters, place collectives
// around its forward), as PyTorch's torch.distributed.tensor.parallel.ParallelStyle.
#pragma once

#include <string>

#include "tensorplay/distributed/process_group.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::distributed::tensor_parallel {

/// One way of splitting a module across a tensor-parallel group.
class ParallelStyle {
 public:
  virtual ~ParallelStyle() = default;
  /// The style and its options ("ColwiseParallel(input_layouts=Replicate(), ...)"), the same on
  /// every rank that was given the same style.
  virtual std::string describe() const = 0;
  /// Throws std::invalid_argument, naming `path`, when the style cannot split `module` over
  /// `tp` (a type it does not handle, a width the group size does not divide). Changes nothing.
  virtual void check(const nn::Module& module, const std::string& path,
                     const ProcessGroup& tp) const = 0;
  /// Splits `module` in place: keeps this rank's share of its parameters and adds forward hooks
  /// running the collectives. Called once per module, after check.
  virtual void apply(nn::Module& module, const std::string& path, const ProcessGroup& tp) const = 0;
};

}  // namespace tensorplay::distributed::tensor_parallel
