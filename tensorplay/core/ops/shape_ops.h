// Ops that change shape or select parts of a tensor: views where the layout allows (reshape,
// dim-0 slices), copies otherwise (cat, narrow, permute, transpose, clone). All with autograd.
#pragma once

#include <vector>

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// View with a new shape (one size may be -1).
Tensor reshape(const Tensor& x, Shape shape);
/// View of rows [start, end) of dimension 0.
Tensor slice0(const Tensor& x, int64_t start, int64_t end);
/// Copy of x that stays in the graph.
Tensor clone(const Tensor& x);
/// Concatenation along `dim`.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// Part [start, start+length) of dimension `dim` (a copy unless dim is 0).
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
/// Copy with dimensions reordered: output dim i is input dim dims[i] (a permutation of 0..rank-1,
/// negative entries count from the end).
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
/// Copy with dimensions d0 and d1 swapped.
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);

}  // namespace tensorplay
