// Sequential container.
#include "tensorplay/nn/sequential.h"

namespace tensorplay::nn {

void SequentialImpl::push_back(std::shared_ptr<Module> module) {
  add_child(std::to_string(named_children().size()), std::move(module));
}

Tensor SequentialImpl::forward(const Tensor& x) {
  Tensor out = x;
  for (const auto& [name, child] : named_children()) out = (*child)(out);
  return out;
}

}  // namespace tensorplay::nn
