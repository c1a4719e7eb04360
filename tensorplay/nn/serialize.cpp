// Module checkpoints.
#include "tensorplay/nn/serialize.h"

#include "tensorplay/core/serialize.h"

namespace tensorplay::nn {

void save(const Module& module, const std::string& path) {
  save_tensors(module.state_dict(), path);
}

LoadStateDictResult load(Module& module, const std::string& path, bool strict) {
  return module.load_state_dict(load_tensors(path), strict);
}

}  // namespace tensorplay::nn
