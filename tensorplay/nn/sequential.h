// Sequential: children named "0", "1", ... run one after another.
#pragma once

#include <memory>
#include <vector>

#include "tensorplay/nn/module.h"

namespace tensorplay::nn {

/// A chain of single-input modules.
class SequentialImpl : public Module {
 public:
  SequentialImpl() = default;
  /// Sequential(Linear(4, 4), ReLU()) takes holders or shared pointers.
  template <typename... Modules>
  explicit SequentialImpl(Modules&&... modules) {
    (push_back(std::forward<Modules>(modules)), ...);
  }

  void push_back(std::shared_ptr<Module> module);
  template <typename Holder, typename = typename std::decay_t<Holder>::ImplType>
  void push_back(Holder&& holder) {
    push_back(std::static_pointer_cast<Module>(holder.ptr()));
  }

  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
  size_t size() const { return named_children().size(); }
  std::shared_ptr<Module> operator[](size_t i) const { return named_children().at(i).second; }
};
TENSORPLAY_MODULE(Sequential);

}  // namespace tensorplay::nn
