// MixedPrecisionPolicy: the dtypes fully_shard computes, reduces and returns in, spelled as
// FSDP2's; the master shards keep the parameters' own dtype (float32).
#pragma once

#include <optional>

#include "tensorplay/core/dtype.h"

namespace tensorplay::distributed::fsdp {

/// FSDP2's MixedPrecisionPolicy. Unset fields keep the parameters' own dtype.
struct MixedPrecisionPolicy {
  /// The dtype parameters are gathered and computed in (cast from the master shard).
  std::optional<DType> param_dtype;
  /// The dtype gradients are reduce-scattered in; unset: the master dtype (float32), as the
  /// issue asks (FSDP2 would use param_dtype).
  std::optional<DType> reduce_dtype;
  /// The dtype the module's output is cast to.
  std::optional<DType> output_dtype;
  /// Whether float32 positional inputs are cast to param_dtype before forward (turn off for a
  /// module whose input holds token ids).
  bool cast_forward_inputs = true;
};

}  // namespace tensorplay::distributed::fsdp
