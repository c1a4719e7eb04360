// mixed_precision: fully_shard over a group of this rank alone (no collective runs).
#include "tensorplay/distributed/fsdp/mixed_precision.h"

namespace tensorplay::distributed::fsdp {

FSDPModule mixed_precision(const std::shared_ptr<nn::Module>& module, MixedPrecisionPolicy policy) {
  const ProcessGroup world;
  return fully_shard(module, {.mesh = world.new_group({world.global_rank()}),
                              .reshard_after_forward = false,
                              .mp_policy = policy});
}

}  // namespace tensorplay::distributed::fsdp
