// checkpoint_wrapper: sets the module's checkpointed flag (Module::operator() does the rest).
#include "tensorplay/nn/checkpoint_wrapper.h"

#include <stdexcept>

namespace tensorplay::nn {

std::shared_ptr<Module> checkpoint_wrapper(std::shared_ptr<Module> module) {
  if (!module)
    throw std::invalid_argument("checkpoint_wrapper: the module is null; pass a constructed one");
  module->set_checkpointed(true);
  return module;
}

}  // namespace tensorplay::nn
