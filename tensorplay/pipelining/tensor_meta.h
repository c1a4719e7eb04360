// TensorMeta: the shape and dtype of one value crossing a stage boundary, as the traced graph,
// the stages and the digests of a split model record it.
#pragma once

#include <string>

#include "tensorplay/core/dtype.h"
#include "tensorplay/core/shape.h"

namespace tensorplay::pipelining {

/// Shape and dtype of one value crossing a stage boundary.
struct TensorMeta {
  Shape shape;
  DType dtype = DType::Float32;
  bool operator==(const TensorMeta&) const = default;
};
std::string to_string(const TensorMeta& meta);

/// "float32[2,16]": how digests and mismatch messages write a value's dtype and shape.
std::string compact_string(const TensorMeta& meta);

}  // namespace tensorplay::pipelining
