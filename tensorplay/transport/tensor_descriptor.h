// What the control plane says about a tensor on the data plane: its shape, dtype and size (the
// transfer's key says where its bytes come from). Never a raw pointer across a process boundary.
#pragma once

#include <cstdint>
#include <vector>

#include "tensorplay/core/tensor.h"

namespace tensorplay::transport {

/// Metadata of one tensor of a transfer.
struct TensorDescriptor {
  Shape shape;
  DType dtype = DType::Float32;
  uint64_t bytes = 0;
  bool defined = true;  ///< false for an absent gradient
  bool operator==(const TensorDescriptor&) const = default;
};

/// Describes `t` (undefined tensors give `defined = false`).
TensorDescriptor describe(const Tensor& t);

}  // namespace tensorplay::transport
