// mixed_precision: the same MixedPrecisionPolicy without sharding, for a model, a pipeline
// stage's blocks or a data-parallel replica that keep whole float32 master weights on the rank.
#pragma once

#include <memory>

#include "tensorplay/distributed/fsdp/fully_shard.h"

namespace tensorplay::distributed::fsdp {

/// Keeps `module`'s parameters (those not held by a module already sharded) as whole master
/// weights on this rank while its forward and backward compute in `policy.param_dtype`: the
/// parameters are cast when its forward starts, and after its backward their gradients come back
/// in the master dtype (reduce_dtype is not used: nothing is reduced). fully_shard over a group of
/// this rank alone, gathered until backward ends; no collective runs. Build the optimizer
/// afterwards; for a data-parallel replica, gradients are then averaged in the master dtype.
FSDPModule mixed_precision(const std::shared_ptr<nn::Module>& module, MixedPrecisionPolicy policy);
template <typename Holder, typename = typename Holder::ImplType>
FSDPModule mixed_precision(const Holder& module, MixedPrecisionPolicy policy) {
  return mixed_precision(std::static_pointer_cast<nn::Module>(module.ptr()), policy);
}

}  // namespace tensorplay::distributed::fsdp
