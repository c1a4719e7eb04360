// An optimizer's state over a tensor-parallel model, gathered whole and cut again: with
// full_state_dict, a checkpoint saved at one tp degree loads at any other (or unsplit).
#pragma once

#include "tensorplay/core/state_dict.h"
#include "tensorplay/distributed/process_group.h"
#include "tensorplay/optim/optimizer.h"

namespace tensorplay::distributed::tensor_parallel {

/// `optimizer.state_dict()` with the state of every parameter that parallelize_module split over
/// `tp` (AdamW's exp_avg and exp_avg_sq, SGD's momentum: each entry of its parameter's shape)
/// gathered whole as full_state_dict gathers the parameter; scalars (a step count) and the
/// state of whole parameters as they are. The state of the same optimizer over the unsplit
/// model, on every member; every member calls it (one all-gather per split entry, in key order).
StateDict full_optimizer_state_dict(const optim::Optimizer& optimizer, const ProcessGroup& tp);

/// Loads `full` (full_optimizer_state_dict's, or an optimizer's over the unsplit model) into
/// `optimizer` over a model split by parallelize_module over `tp` at any degree: the state of a
/// split parameter is cut to this member's share as the parameter was (packed parts too), the
/// rest loaded as it is. Build the optimizer over the split model first. Throws
/// std::invalid_argument naming the key whose tensor is neither the parameter's whole shape nor
/// its share, and optimizer::load_state_dict's errors; no communication.
void load_full_optimizer_state_dict(optim::Optimizer& optimizer, const StateDict& full,
                                    const ProcessGroup& tp);

}  // namespace tensorplay::distributed::tensor_parallel
