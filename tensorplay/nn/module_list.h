// ModuleList: an indexed list of child modules named "0", "1", ..., as torch.nn.ModuleList. It
// registers its modules (so their parameters have paths like "blocks.2.attn.c_attn.weight") but,
// unlike Sequential, has no forward: the owner decides how to call them.
#pragma once

#include <memory>
#include <vector>

#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// A list of child modules; not callable.
class ModuleListImpl : public Module {
 public:
  ModuleListImpl() = default;
  /// ModuleList(Linear(4, 4), ReLU()) takes holders or shared pointers.
  template <typename... Modules>
  explicit ModuleListImpl(Modules&&... modules) {
    (push_back(std::forward<Modules>(modules)), ...);
  }

  // -- modifiers ---------------------------------------------------------------------------------

  /// Appends a module under the next index as its name.
  void push_back(std::shared_ptr<Module> module);
  template <typename Holder, typename = typename std::decay_t<Holder>::ImplType>
  void push_back(Holder&& holder) {
    push_back(std::static_pointer_cast<Module>(holder.ptr()));
  }

  // -- observers ---------------------------------------------------------------------------------

  size_t size() const { return named_children().size(); }
  bool empty() const { return named_children().empty(); }
  /// The module at `index`; throws std::out_of_range naming the index and the size.
  std::shared_ptr<Module> operator[](size_t index) const;
  /// The module at `index` as its concrete type; throws when it is of another type.
  template <typename T>
  std::shared_ptr<T> at(size_t index) const {
    auto typed = std::dynamic_pointer_cast<T>((*this)[index]);
    if (!typed) throw_wrong_type(index);
    return typed;
  }
  /// Iterates the modules in order.
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }

  /// Throws: a ModuleList is a container, call its modules instead.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ModuleList"; }

 private:
  [[noreturn]] void throw_wrong_type(size_t index) const;
  std::vector<std::shared_ptr<Module>> modules_;
};
TENSORPLAY_MODULE(ModuleList);

}  // namespace tensorplay::nn
