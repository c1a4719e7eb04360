// Splitting a tensor into pieces along a dimension, built on narrow (dim-0 pieces are views).
#pragma once

#include <cstdint>
#include <vector>

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// Pieces of `split_size` along `dim` (the last one smaller when the size does not divide).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
/// Pieces of the given sizes along `dim` (they must add up to the dimension's size).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
/// `chunks` pieces of ceil(size / chunks) along `dim`, as torch.chunk (fewer when they run out).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
/// Exactly `sections` pieces along `dim`, as torch.tensor_split: the first size % sections pieces
/// have one element more than the others.
std::vector<Tensor> tensor_split(const Tensor& x, int64_t sections, int64_t dim = 0);
/// Pieces cut at the given indices along `dim`, as torch.tensor_split with indices.
std::vector<Tensor> tensor_split(const Tensor& x, const std::vector<int64_t>& indices,
                                 int64_t dim = 0);

}  // namespace tensorplay
