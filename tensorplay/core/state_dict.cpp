// Ordered name -> tensor map.
#include "tensorplay/core/state_dict.h"

#include <stdexcept>

namespace tensorplay {

void StateDict::insert(const std::string& name, Tensor tensor) {
  if (index_.count(name))
    throw std::invalid_argument("StateDict: key '" + name + "' is already present");
  index_.emplace(name, items_.size());
  items_.emplace_back(name, std::move(tensor));
}

void StateDict::insert_or_assign(const std::string& name, Tensor tensor) {
  auto it = index_.find(name);
  if (it == index_.end()) {
    insert(name, std::move(tensor));
    return;
  }
  items_[it->second].second = std::move(tensor);
}

const Tensor& StateDict::at(const std::string& name) const {
  const Tensor* t = find(name);
  if (!t) throw std::out_of_range("StateDict: no key '" + name + "'");
  return *t;
}

const Tensor* StateDict::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& item : items_) out.push_back(item.first);
  return out;
}

}  // namespace tensorplay
