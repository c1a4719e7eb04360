// Printing placements.
#include "tensorplay/distributed/tensor_parallel/placement.h"

namespace tensorplay::distributed::tensor_parallel {

std::string to_string(const Placement& placement) {
  if (const auto* shard = std::get_if<Shard>(&placement))
    return "Shard(" + std::to_string(shard->dim) + ")";
  return "Replicate()";
}

}  // namespace tensorplay::distributed::tensor_parallel
