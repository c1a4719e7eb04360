// The process's table of knobs (knob_registry.h): the rows the layers registered, in order.
#include "tensorplay/base/knob_registry.h"

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>

namespace tensorplay::inline base {
namespace {

struct Registered {
  std::string layer;
  const KnobSpec* row;
};

struct Registry {
  std::mutex mutex;
  std::vector<std::string> layers;
  std::vector<Registered> rows;
};

Registry& registry() {
  static Registry r;
  return r;
}

// The registered row with `name` as its name or old name, or null; the caller holds the lock.
const Registered* find_locked(const Registry& r, std::string_view name) {
  if (name.empty()) return nullptr;
  for (const Registered& entry : r.rows)
    if (entry.row->name == name || entry.row->alias == name) return &entry;
  return nullptr;
}

void check_clash(const Registry& r, std::string_view layer, const KnobSpec& row,
                 std::string_view name) {
  const Registered* other = find_locked(r, name);
  if (other == nullptr || other->row == &row) return;
  throw std::logic_error("knob " + std::string(name) + " of layer " + std::string(layer) +
                         " is already a row of layer " + other->layer + " (" +
                         std::string(other->row->name) +
                         "): a variable is declared once; read the existing row instead");
}

}  // namespace

void register_knobs(std::string_view layer, std::span<const KnobSpec* const> rows) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (std::find(r.layers.begin(), r.layers.end(), layer) != r.layers.end()) return;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] == nullptr)
      throw std::logic_error("layer " + std::string(layer) + " registers a null knob row (row " +
                             std::to_string(i) + ")");
    check_clash(r, layer, *rows[i], rows[i]->name);
    check_clash(r, layer, *rows[i], rows[i]->alias);
    for (size_t j = 0; j < i; ++j)
      if (rows[j] == rows[i] || rows[j]->name == rows[i]->name)
        throw std::logic_error("layer " + std::string(layer) + " lists knob " +
                               std::string(rows[i]->name) + " twice");
  }
  r.layers.emplace_back(layer);
  for (const KnobSpec* row : rows) r.rows.push_back({std::string(layer), row});
}

std::vector<std::reference_wrapper<const KnobSpec>> knob_table() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::reference_wrapper<const KnobSpec>> out;
  out.reserve(r.rows.size());
  for (const Registered& entry : r.rows) out.emplace_back(*entry.row);
  return out;
}

const KnobSpec* find_knob(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const Registered* entry = find_locked(r, name);
  return entry == nullptr ? nullptr : entry->row;
}

std::vector<std::string_view> knob_layers() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return {r.layers.begin(), r.layers.end()};
}

}  // namespace tensorplay::inline base
