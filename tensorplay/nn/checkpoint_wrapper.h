// checkpoint_wrapper: makes a module's forward run under autograd::checkpoint, so its activations
// are recomputed in the backward instead of kept (PyTorch's checkpoint_wrapper).
#pragma once

#include <memory>
#include <type_traits>

#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// Wraps `module` in place and returns it: from now on each call through its operator() (as a
/// parent calls its children) runs its forward under autograd::checkpoint, keeping only the
/// inputs for the backward, which recomputes the forward. Unlike PyTorch's wrapper, which adds a
/// `_checkpoint_wrapped_module.` level, the module keeps its place in the tree, so parameter
/// names, state_dict keys and split specs stay as they were. set_checkpointed(false) unwraps it.
/// Throws std::invalid_argument on a null module.
std::shared_ptr<Module> checkpoint_wrapper(std::shared_ptr<Module> module);

/// The same for a module holder (`checkpoint_wrapper(Linear(4, 4))`), returning the holder.
template <typename Holder, typename = typename Holder::ImplType>
Holder checkpoint_wrapper(Holder holder) {
  checkpoint_wrapper(std::static_pointer_cast<Module>(holder.ptr()));
  return holder;
}

}  // namespace tensorplay::nn
