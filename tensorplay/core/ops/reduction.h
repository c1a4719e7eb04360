// Reductions: sum and mean over all elements or along one dimension.
#pragma once

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// Sum of all elements (a scalar).
Tensor sum(const Tensor& x);
/// Sum along `dim` (kept as size 1 when keepdim).
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
/// Mean of all elements (a scalar).
Tensor mean(const Tensor& x);
/// Mean along `dim`.
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace tensorplay
