// Full state dicts of a sharded model: every parameter gathered whole from the shards in its
// master dtype, and loaded back into shards of any dp degree (or into a model not sharded).
#pragma once

#include "tensorplay/core/state_dict.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::distributed::fsdp {

/// `root`'s state_dict() with every sharded parameter gathered whole from its shards, in its
/// master dtype (float32 under a bfloat16 policy), padding dropped: the dict a model that was
/// never sharded would give, on every member. Collective over each sharded module's group (every
/// member calls it); call it between steps (parameters resharded). Tensors are copies.
StateDict full_state_dict(const nn::Module& root);

/// Loads a full state dict (full_state_dict's, or an unsharded model's state_dict()) into `root`:
/// each sharded parameter takes this rank's rows of the full tensor, others are copied whole.
/// No collective runs, so a dict saved at one dp degree loads at any other. Call it between
/// steps. Throws std::invalid_argument naming a missing key or a shape that differs.
void load_full_state_dict(nn::Module& root, const StateDict& full);

}  // namespace tensorplay::distributed::fsdp
