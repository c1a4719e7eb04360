// Activation recomputation per pipeline stage: which of a stage's modules run under
// autograd::checkpoint (none, every block, every k-th block, or the modules of given types).
#pragma once

#include <string>
#include <vector>

#include "tensorplay/nn/module.h"

namespace tensorplay::pipelining {

/// Which modules of a stage recompute their forward in the backward instead of keeping their
/// activations between forward and backward, as torchtitan's activation checkpointing: none,
/// full (every block) or selective (every k-th block, or the modules of given types). A block is
/// an element of a ModuleList or a Sequential (a GPT's `blocks.3`); the outermost such count, and
/// what lies outside every block (embeddings, the head) keeps its activations.
struct RecomputePolicy {
  enum class Mode { None, Full, EveryKth, ByType };
  Mode mode = Mode::None;
  /// EveryKth: block i (its index in its list) recomputes when (i + 1) % every == 0, so every:2
  /// recomputes blocks 1, 3, 5, ... as torchtitan's selective layer mode counts them.
  int every = 1;
  /// ByType: type names (Module::type_name(): "TransformerBlock", "MLP").
  std::vector<std::string> types;

  static RecomputePolicy none() { return {}; }
  static RecomputePolicy full() {
    RecomputePolicy policy;
    policy.mode = Mode::Full;
    return policy;
  }
  /// Throws std::invalid_argument unless k >= 1.
  static RecomputePolicy every_kth(int k);
  /// Throws std::invalid_argument on an empty list or an empty name.
  static RecomputePolicy by_type(std::vector<std::string> types);
  /// "none", "full", "every:K" or "type:Name[,Name...]" (train_gpt's --recompute); throws
  /// std::invalid_argument naming the forms it reads.
  static RecomputePolicy parse(const std::string& text);
  /// The text parse reads back.
  std::string to_string() const;
  bool operator==(const RecomputePolicy&) const = default;
};

/// Dotted paths of the modules of `root` that `policy` recomputes, in named_modules() order, none
/// inside another.
std::vector<std::string> recomputed_module_paths(nn::Module& root, const RecomputePolicy& policy);

}  // namespace tensorplay::pipelining
