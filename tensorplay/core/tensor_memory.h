// Which account a tensor's memory is charged to: adopting received tensors, taking over ones a
// stage let go of, disowning a step's outputs, and marking gradients (memory_accounting.h).
#pragma once

#include <vector>

#include "tensorplay/core/memory_accounting.h"
#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// Charges the storages of `tensors` that no account holds to this thread's current account as
/// Activation bytes: a stage's inputs and gradients received from another process are the
/// stage's (within a process they stay with the stage that made them, which holds them too).
/// Does nothing outside a scope.
void adopt_memory(const std::vector<Tensor>& tensors);

/// Charges to this thread's current account, as Activation bytes, the storages of `tensors`
/// that nothing else holds, whatever account they were charged to: a stage's inputs made in
/// this process by a stage that let go of them (a recomputing stage keeps only its outputs'
/// history) are the receiving stage's alone. A storage held elsewhere too stays where it is.
/// Does nothing outside a scope.
void take_over_memory(const std::vector<Tensor>& tensors);

/// Stops charging the storages of `tensors` to any account: they are no stage's any more (a
/// finished step's outputs, which belong to the caller).
void disown_memory(const std::vector<Tensor>& tensors);

/// Moves `tensor`'s storage to the Gradient kind of the account it is charged to (autograd calls
/// it when a leaf gets its first gradient).
void mark_gradient_memory(const Tensor& tensor);

}  // namespace tensorplay
