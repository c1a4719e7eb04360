// ModuleList container.
#include "tensorplay/nn/module_list.h"

#include <stdexcept>

namespace tensorplay::nn {

void ModuleListImpl::push_back(std::shared_ptr<Module> module) {
  add_child(std::to_string(size()), module);
  modules_.push_back(std::move(module));
}

std::shared_ptr<Module> ModuleListImpl::operator[](size_t index) const {
  if (index >= modules_.size())
    throw std::out_of_range("ModuleList: index " + std::to_string(index) +
                            " out of range for a list of " + std::to_string(modules_.size()) +
                            " modules");
  return modules_[index];
}

void ModuleListImpl::throw_wrong_type(size_t index) const {
  throw std::invalid_argument("ModuleList: module " + std::to_string(index) + " is a " +
                              modules_[index]->type_name() + ", not the type asked for");
}

Tensor ModuleListImpl::forward(const Tensor&) {
  throw std::logic_error(
      "ModuleList is not callable: iterate over it and call each module (for (auto& m : list))");
}

}  // namespace tensorplay::nn
