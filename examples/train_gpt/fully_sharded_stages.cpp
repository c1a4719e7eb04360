// train_gpt --fsdp (fully_sharded_stages.h).
#include "fully_sharded_stages.h"

#include <stdexcept>

#include "tensorplay/core/autograd/grad_mode.h"
#include "tensorplay/distributed/fsdp/fully_shard.h"
#include "tensorplay/pipelining/recompute.h"

namespace tp = tensorplay;
namespace fsdp = tensorplay::distributed::fsdp;
namespace pp = tensorplay::pipelining;

namespace train_gpt {

void shard_stages(const Options& o, const std::vector<std::shared_ptr<pp::PipelineStage>>& stages,
                  const tp::distributed::ProcessGroup& dp_group, const tp::StateDict& masters) {
  if (o.dp < 2)
    throw std::invalid_argument(
        "--fsdp shards each stage over its --dp replicas: pass --dp 2 "
        "or more (tp-launch starts pipeline ranks x dp processes)");
  fsdp::FullyShardOptions sharding{.mesh = dp_group};
  if (o.mixed_precision == "bf16") sharding.mp_policy.param_dtype = tp::DType::BFloat16;
  for (const auto& stage : stages) {
    if (!masters.empty()) {
      stage->module().to(tp::DType::Float32);
      tp::NoGradGuard no_grad;
      for (auto& [name, p] : stage->module().named_parameters()) p.copy_(masters.at(name));
    }
    for (const auto& path :
         pp::recomputed_module_paths(stage->module(), pp::RecomputePolicy::full()))
      fsdp::fully_shard(stage->module().find_module(path), sharding);
    fsdp::fully_shard(stage->module_ptr(), sharding);
  }
}

}  // namespace train_gpt
