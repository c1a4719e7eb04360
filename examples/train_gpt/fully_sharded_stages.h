// train_gpt --fsdp: this rank's pipeline stages sharded over their data-parallel replicas, each
// block and then the stage, with --mixed-precision bf16's float32 master weights.
#pragma once

#include <memory>
#include <vector>

#include "options.h"
#include "tensorplay/core/state_dict.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/pipelining/pipeline_stage.h"

namespace train_gpt {

/// Shards each of `stages` over `dp_group` as torchtitan applies fully_shard: every recomputable
/// block, then the stage itself (its other parameters). With `masters` (--mixed-precision bf16),
/// the stages' bfloat16 parameters first become float32 master weights of those values, gathered
/// in bfloat16. Throws std::invalid_argument when --dp is below 2.
void shard_stages(const Options& o,
                  const std::vector<std::shared_ptr<tensorplay::pipelining::PipelineStage>>& stages,
                  const tensorplay::distributed::ProcessGroup& dp_group,
                  const tensorplay::StateDict& masters);

}  // namespace train_gpt
