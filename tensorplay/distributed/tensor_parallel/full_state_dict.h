// The whole tensors of a tensor-parallel model: its shards gathered, for checkpoints that load
// at any other layout (another tp degree, or unsplit).
#pragma once

#include "tensorplay/core/state_dict.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/nn/module.h"

namespace tensorplay::distributed::tensor_parallel {

/// `module.state_dict()` with every tensor that parallelize_module split over `tp` gathered
/// whole (packed parts put back in place), the others as they are: the state dict of the
/// unsplit model, on every member. Every member calls it (it all-gathers each split tensor in
/// state-dict order). To load at another layout, load it into an unsplit model and split that
/// with parallelize_module (any tp degree), or use it unsplit.
StateDict full_state_dict(const nn::Module& module, const ProcessGroup& tp);

/// Loads `full` (the unsplit model's state dict, full_state_dict's) into `module` split over
/// `tp` by parallelize_module at any degree: each split tensor takes this member's share of its
/// whole tensor (packed parts too), the others load as they are (Module::load_state_dict, whose
/// errors it throws). No communication.
void load_full_state_dict(nn::Module& module, const StateDict& full, const ProcessGroup& tp);

}  // namespace tensorplay::distributed::tensor_parallel
