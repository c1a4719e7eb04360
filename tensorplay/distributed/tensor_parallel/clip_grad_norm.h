// Gradient clipping by global norm for a model split by tensor parallelism: the norm of the
// unsplit model's gradients, as optim::clip_grad_norm would compute it there.
#pragma once

#include <vector>

#include "tensorplay/core/tensor.h"
#include "tensorplay/distributed/process_group.h"

namespace tensorplay::distributed::tensor_parallel {

/// The global norm of the gradients of `parameters` (this rank's, of a model split over `tp` by
/// parallelize_module): the squares of split parameters' gradients summed over the group, those
/// of whole (replicated) ones counted once. Scales every gradient by max_norm / (norm + 1e-6)
/// when that is below 1, and returns the norm before clipping, as optim::clip_grad_norm on the
/// unsplit model. Every member calls it with its parameters in the same order (one all-reduce).
/// Throws std::invalid_argument when max_norm < 0.
float clip_grad_norm(const std::vector<Tensor>& parameters, float max_norm, const ProcessGroup& tp);

}  // namespace tensorplay::distributed::tensor_parallel
