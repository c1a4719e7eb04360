// StateDict: an insertion-ordered map from dotted names to tensors, the unit that modules and
// optimizers export and import and that the binary checkpoint format (serialize.h) stores.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensorplay/core/tensor.h"

namespace tensorplay {

/// Name -> Tensor, iterated in insertion order (the order a module registered its tensors).
class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;

  // -- modifiers ---------------------------------------------------------------------------------

  /// Adds `name`; throws std::invalid_argument when the name is already present.
  void insert(const std::string& name, Tensor tensor);
  /// Adds `name` or replaces its tensor, keeping its position.
  void insert_or_assign(const std::string& name, Tensor tensor);

  // -- observers ---------------------------------------------------------------------------------

  /// The tensor under `name`; throws std::out_of_range naming the key when absent.
  const Tensor& at(const std::string& name) const;
  /// The tensor under `name`, or null when absent.
  const Tensor* find(const std::string& name) const;
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  /// Names in order.
  std::vector<std::string> keys() const;

  std::vector<Item>::const_iterator begin() const { return items_.begin(); }
  std::vector<Item>::const_iterator end() const { return items_.end(); }
  const std::vector<Item>& items() const { return items_; }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace tensorplay
