// Embedding lookup: rows of a weight table selected by integer ids.
#pragma once

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// weight[vocab, dim] rows picked by `indices` (float32 holding integer ids, any shape [...]):
/// output [..., dim]. Gradient flows to weight only. An id that is not an integer in [0, vocab)
/// is an error naming the id and the vocabulary size.
Tensor embedding(const Tensor& indices, const Tensor& weight);

}  // namespace tensorplay
