// Activation checkpointing (recomputation): a function's forward keeps no activations, only its
// inputs, and the backward recomputes it, as PyTorch's non-reentrant torch.utils.checkpoint.
#pragma once

#include <functional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensorplay/core/tensor.h"

namespace tensorplay::autograd {

/// A function checkpoint() runs: tensors in, tensors out.
using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// Thrown in the backward when the recomputation does not repeat the forward (another op, another
/// shape, another number of outputs), or when a checkpoint cannot recompute.
class RecomputationError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Runs `fn(inputs)` and returns its outputs, keeping for the backward only `inputs`, `fn` and the
/// states its random draws started from, not the activations its ops would save. The first time
/// the backward reaches one of its ops, `fn` runs again on the same inputs with grad mode on, and
/// each of its draws (each Generator::lock(), as dropout and the tensor factories take it) starts
/// from the state the forward's did, on a private copy of the engine: dropout draws the same
/// masks, and the generator itself, and other threads drawing from it, are untouched. Each op of
/// the forward then runs its backward with the tensors the recomputation saved; the graph outside
/// is untouched. So gradients equal those without the checkpoint bit for bit, with a full
/// backward or a split one: the input-only backward (I) recomputes once, and the weight-only
/// backward (W) uses what it kept.
///
/// Checkpoints nest: an inner checkpoint's inputs are held by the outer one's recomputation.
/// Under grad mode off, `fn` just runs. `fn` (copied) and what it refers to (modules, generators)
/// must live until the backward has run.
///
/// Throws std::invalid_argument when no output requires grad (nothing to recompute), and, in the
/// backward, RecomputationError when the recomputation runs other ops or shapes than the forward,
/// or draws other random numbers.
std::vector<Tensor> checkpoint(CheckpointFn fn, const std::vector<Tensor>& inputs);

/// While alive on this thread, checkpoint() runs its function plainly: the forward keeps its
/// activations and the backward recomputes nothing (a pipeline stage whose backward of the
/// microbatch comes right after its forward: the activations would be rebuilt at once). The
/// gradients are the same bits.
class KeepActivationsGuard {
 public:
  KeepActivationsGuard();
  ~KeepActivationsGuard();
  KeepActivationsGuard(const KeepActivationsGuard&) = delete;
  KeepActivationsGuard& operator=(const KeepActivationsGuard&) = delete;

 private:
  bool previous_;
};

/// Runs now the recomputation a backward from `roots` would run first: of the checkpoints whose
/// ops under `roots` still wait for theirs, the one holding the latest op (the backward reaches it
/// first; enclosing checkpoints recompute first, as in the backward). Returns whether one ran. The
/// backward then finds those activations rebuilt: its gradients are the same bit for bit, and
/// each checkpoint still recomputes once. A pipeline stage calls it while it waits for a
/// microbatch's output gradient, so that the recomputation fills the wait. Throws what the
/// recomputation throws (RecomputationError).
bool recompute_ahead(const std::vector<Tensor>& roots);

}  // namespace tensorplay::autograd

namespace tensorplay {

using autograd::checkpoint;
using autograd::CheckpointFn;
using autograd::RecomputationError;

/// `checkpoint(fn, a, b, ...)`: `fn(a, b, ...)` returning a Tensor or a std::vector<Tensor>,
/// under autograd::checkpoint; returns what `fn` returns.
template <typename Fn, typename... Inputs>
requires(std::is_same_v<std::decay_t<Inputs>, Tensor>&&...) &&
    std::is_invocable_v<Fn&, const Inputs&...> auto checkpoint(Fn fn, const Inputs&... inputs) {
  using Result = std::decay_t<std::invoke_result_t<Fn&, const Inputs&...>>;
  static_assert(std::is_same_v<Result, Tensor> || std::is_same_v<Result, std::vector<Tensor>>,
                "checkpoint: the function must return a Tensor or a std::vector<Tensor>");
  CheckpointFn call = [fn = std::move(fn)](const std::vector<Tensor>& in) mutable {
    auto invoke = [&]<size_t... I>(std::index_sequence<I...>) { return fn(in[I]...); };
    if constexpr (std::is_same_v<Result, Tensor>) {
      return std::vector<Tensor>{invoke(std::index_sequence_for<Inputs...>{})};
    } else {
      return invoke(std::index_sequence_for<Inputs...>{});
    }
  };
  std::vector<Tensor> out = autograd::checkpoint(std::move(call), {inputs...});
  if constexpr (std::is_same_v<Result, Tensor>) {
    return out.at(0);
  } else {
    return out;
  }
}

}  // namespace tensorplay
