// The layouts of a list of tensors (how many, then each one's dtype and shape) as bytes: what
// replicas and group members exchange before the tensors' bytes themselves.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tensorplay/core/tensor.h"

namespace tensorplay::detail {

/// One tensor's dtype and shape.
struct TensorLayout {
  DType dtype = DType::Float32;
  Shape shape;
};

/// The count, then each tensor's dtype, rank and sizes, as 64-bit words in host byte order (for
/// processes of one job, which share a byte order).
std::string encode_layouts(const std::vector<Tensor>& tensors);

/// What encode_layouts wrote; nullopt when the bytes are cut short or claim more than they hold.
std::optional<std::vector<TensorLayout>> decode_layouts(const std::string& bytes);

}  // namespace tensorplay::detail
