// Saving an optimizer's state (hyper-parameters, momentum buffers, Adam moments and step counts)
// to a checkpoint file and loading it back, in the module checkpoint format
// (tensorplay/core/serialize.h).
#pragma once

#include <string>

#include "tensorplay/optim/optimizer.h"

namespace tensorplay::optim {

/// Writes optimizer.state_dict() to `path`.
void save(const Optimizer& optimizer, const std::string& path);
/// Reads `path` and restores it with optimizer.load_state_dict. The optimizer must have been
/// built over the same parameters in the same order (the state is keyed by parameter index).
void load(Optimizer& optimizer, const std::string& path);

}  // namespace tensorplay::optim
