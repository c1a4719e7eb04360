// FullyShardOptions: what fully_shard shards over (the data-parallel group) and how (resharding
// after forward, the mixed-precision policy); apart from fully_shard.h for the sharding state.
#pragma once

#include "tensorplay/distributed/fsdp/mixed_precision_policy.h"
#include "tensorplay/distributed/process_group.h"

namespace tensorplay::distributed::fsdp {

/// What fully_shard shards over and how.
struct FullyShardOptions {
  /// The data-parallel group (`mesh["dp"]` converts to one); every rank of it calls fully_shard
  /// on the same module, in the same order.
  ProcessGroup mesh;
  /// Free the gathered parameters after forward (gather again before backward) when true; keep
  /// them until the end of backward when false.
  bool reshard_after_forward = true;
  /// Dtypes of compute, reduction and output.
  MixedPrecisionPolicy mp_policy;
};

}  // namespace tensorplay::distributed::fsdp
