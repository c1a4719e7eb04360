// Saving a module's state_dict to a checkpoint file and loading it back (format: serialize.h).
#pragma once

#include <string>

#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// Writes module.state_dict() to `path` in the tensorplay checkpoint format.
void save(const Module& module, const std::string& path);
/// Reads `path` and loads it into `module` with load_state_dict(dict, strict).
LoadStateDictResult load(Module& module, const std::string& path, bool strict = true);

/// Holder overloads: nn::save(model, path) with `model` a ModuleHolder such as GPT.
template <typename Holder, typename = typename Holder::ImplType>
void save(const Holder& holder, const std::string& path) {
  save(static_cast<const Module&>(*holder), path);
}
template <typename Holder, typename = typename Holder::ImplType>
LoadStateDictResult load(const Holder& holder, const std::string& path, bool strict = true) {
  return load(static_cast<Module&>(*holder), path, strict);
}

}  // namespace tensorplay::nn
