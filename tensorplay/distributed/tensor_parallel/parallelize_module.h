// parallelize_module: splits a model's modules across a tensor-parallel group by a plan that
// maps module paths to parallel styles, as PyTorch's parallelize_module.
#pragma once

#include <concepts>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensorplay/distributed/process_group.h"
#include "tensorplay/distributed/tensor_parallel/parallel_style.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::distributed::tensor_parallel {

/// One entry of a plan: a module path and the style that splits it.
struct PlanEntry {
  /// `path` is a dotted module path from the model ("blocks.0.attn.c_attn"), as PyTorch's fully
  /// qualified names; a segment `*` matches every child ("blocks.*.mlp.c_fc").
  template <std::derived_from<ParallelStyle> Style>
  PlanEntry(std::string path_, Style style_)  // NOLINT: a plan is written as {path, style} pairs
      : path(std::move(path_)), style(std::make_shared<Style>(std::move(style_))) {}
  PlanEntry(std::string path_, std::shared_ptr<const ParallelStyle> style_)
      : path(std::move(path_)), style(std::move(style_)) {}

  std::string path;
  std::shared_ptr<const ParallelStyle> style;
};

/// A plan: entries applied in order, each to every module its path matches.
using ParallelizePlan = std::vector<PlanEntry>;

/// Splits `module`'s modules named by `plan` across `tp` (a group, or a mesh's "tp" dimension),
/// in place, on every member of the group; each member keeps its share of the parameters, and
/// the modules' forwards run the collectives. Build optimizers afterwards.
///
/// Checks everything before changing anything: first the members compare their groups and
/// plans (through the group's all_gather_bytes) and each throws std::invalid_argument naming the
/// first member that differs; then every entry must match a module and its style must be able
/// to split it (std::invalid_argument naming the path and what is wrong, on every member). A member
/// that does not take part within the group's timeout makes the others throw DistributedError
/// naming it.
void parallelize_module(nn::Module& module, const ProcessGroup& tp, const ParallelizePlan& plan);

/// The modules a plan path matches, with their paths (empty when none).
std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> match_modules(
    nn::Module& module, const std::string& path);

}  // namespace tensorplay::distributed::tensor_parallel
