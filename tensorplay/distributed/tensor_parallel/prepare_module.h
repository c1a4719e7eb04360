// PrepareModuleInput and PrepareModuleOutput: a module's first input or its output changed from
// one layout to another at the module's edge, as PyTorch's styles of those names.
#pragma once

#include <string>

#include "tensorplay/distributed/tensor_parallel/parallel_style.h"
#include "tensorplay/distributed/tensor_parallel/placement.h"

namespace tensorplay::distributed::tensor_parallel {

/// `from` made `to`: Replicate to Shard(d) keeps this rank's chunk (its gradient all-gathered),
/// Shard(d) to Replicate all-gathers (its gradient chunked), equal layouts do nothing.
/// Throws std::invalid_argument for a Shard to a Shard of another dimension.
Tensor redistribute(const Tensor& x, const Placement& from, const Placement& to,
                    const ProcessGroup& tp);

/// Options of PrepareModuleInput: the first positional input's layout and the one the module
/// wants (PyTorch's input_layouts and desired_input_layouts, for one input).
struct PrepareModuleInputOptions {
  Placement input_layouts = Replicate();
  Placement desired_input_layouts = Replicate();
};

/// Redistributes the module's first input before its forward.
class PrepareModuleInput : public ParallelStyle {
 public:
  explicit PrepareModuleInput(PrepareModuleInputOptions options) : options_(options) {}
  std::string describe() const override;
  void check(const nn::Module& module, const std::string& path,
             const ProcessGroup& tp) const override;
  void apply(nn::Module& module, const std::string& path, const ProcessGroup& tp) const override;

 private:
  PrepareModuleInputOptions options_;
};

/// Options of PrepareModuleOutput: the output's layout and the one wanted after the module.
struct PrepareModuleOutputOptions {
  Placement output_layouts = Replicate();
  Placement desired_output_layouts = Replicate();
};

/// Redistributes the module's output after its forward.
class PrepareModuleOutput : public ParallelStyle {
 public:
  explicit PrepareModuleOutput(PrepareModuleOutputOptions options) : options_(options) {}
  std::string describe() const override;
  void check(const nn::Module& module, const std::string& path,
             const ProcessGroup& tp) const override;
  void apply(nn::Module& module, const std::string& path, const ProcessGroup& tp) const override;

 private:
  PrepareModuleOutputOptions options_;
};

}  // namespace tensorplay::distributed::tensor_parallel
