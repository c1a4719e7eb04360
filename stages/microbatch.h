// Microbatching: splitting a batch's inputs into microbatches along a chunk dimension, and merging
// per-microbatch outputs back, as TensorChunkSpec does in PyTorch's pipelining.
#pragma once

#include <vector>

#include "tensors/tensor.h"

namespace tensorplay::pipelining {

/// Which dimension of an input is split into microbatches.
struct TensorChunkSpec {
  int64_t dim = 0;
};

/// Splits each tensor of `args` into `n` chunks along its spec's dimension (dim 0 by default):
/// result[mb][i] is chunk mb of args[i]. Chunks of dim 0 are views. When `allow_uneven` is
/// false, a size not divisible by n is an error naming the input and the sizes.
std::vector<std::vector<Tensor>> split_into_microbatches(const std::vector<Tensor>& args, int n,
                                                         const std::vector<TensorChunkSpec>& specs = {},
                                                         bool allow_uneven = false);

/// Concatenates per-microbatch tensors along `dim`.
Tensor merge_chunks(const std::vector<Tensor>& chunks, int64_t dim = 0);

}  // namespace tensorplay::pipelining
