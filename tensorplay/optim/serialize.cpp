// Optimizer checkpoints.
#include "tensorplay/optim/serialize.h"

#include "tensorplay/core/serialize.h"

namespace tensorplay::optim {

void save(const Optimizer& optimizer, const std::string& path) {
  save_tensors(optimizer.state_dict(), path);
}

void load(Optimizer& optimizer, const std::string& path) {
  optimizer.load_state_dict(load_tensors(path));
}

}  // namespace tensorplay::optim
