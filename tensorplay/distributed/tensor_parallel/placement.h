// How a tensor lies across the ranks of a tensor-parallel group: whole on each (Replicate) or cut
// along one dimension (Shard), as PyTorch's placements of a DTensor.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

namespace tensorplay::distributed::tensor_parallel {

/// Every rank holds the whole tensor.
struct Replicate {
  bool operator==(const Replicate&) const = default;
};
/// Rank r holds the r-th of equal pieces along `dim` (negative counts from the end).
struct Shard {
  int64_t dim = 0;
  bool operator==(const Shard&) const = default;
};
/// A layout: Replicate or Shard.
using Placement = std::variant<Replicate, Shard>;

/// "Replicate()" or "Shard(d)".
std::string to_string(const Placement& placement);

}  // namespace tensorplay::distributed::tensor_parallel
