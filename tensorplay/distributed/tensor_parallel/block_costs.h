// What one GPT or Llama block split by its model plan costs each rank of the tp group: the
// collectives of a microbatch's forward and backward and their bytes, and the rank's parameter
// bytes; the figures a planner weighs a tp degree by.
#pragma once

#include <cstdint>

#include "tensorplay/distributed/tensor_parallel/model_plans.h"
#include "tensorplay/nn/gpt.h"
#include "tensorplay/nn/llama.h"

namespace tensorplay::distributed::tensor_parallel {

/// One block's costs to one rank of the tp group, for one microbatch's forward and backward.
struct BlockCosts {
  /// Collective calls (forward and backward), as collective_figures() counts them.
  int64_t collectives = 0;
  /// Their payload bytes: each call's input tensor, as collective_figures() counts them (an
  /// all-gather's input is this rank's shard, a reduce-scatter's the whole tensor).
  int64_t collective_bytes = 0;
  /// This rank's parameter bytes of the block.
  int64_t parameter_bytes = 0;
};

/// A GPT block under gpt_tp_plan(config, tp, options) on `tokens` tokens a microbatch (batch x
/// sequence), `element_bytes` per activation and parameter element. Without sequence
/// parallelism: the two column-parallel layers' input gradients and the two row-parallel
/// outputs all-reduced; with it, each of those an all-gather and a reduce-scatter, and the two
/// LayerNorms' weight and bias gradients and the row-parallel layers' bias gradients all-reduced.
/// keep_input_shards (a recomputed gather) is not counted. Throws std::invalid_argument as
/// gpt_tp_plan does, or for tokens < 1.
BlockCosts gpt_block_costs(const nn::GPTConfig& config, int64_t tokens, int tp,
                           ModelPlanOptions options = {}, int64_t element_bytes = 4);

/// The same for a Llama block under llama_tp_plan: q, k, v, gate and up column-parallel (k and v
/// replicated, their input gathered under sequence parallelism and their output gradients
/// all-reduced, when tp does not divide the key-value heads), o and down row-parallel, the
/// RMSNorms' weight gradients all-reduced under sequence parallelism.
BlockCosts llama_block_costs(const nn::LlamaConfig& config, int64_t tokens, int tp,
                             ModelPlanOptions options = {}, int64_t element_bytes = 4);

}  // namespace tensorplay::distributed::tensor_parallel
