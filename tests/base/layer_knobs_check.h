// What every layer's knob header promises, checked the same way for each: its registration adds
// its rows after those of the layers below it, and each row's default and example parse.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorplay/base/knob_registry.h"
#include "tensorplay/base/knob_spec.h"

namespace layer_knobs_check {

/// Calls `register_layer`, then checks that `layer` and every layer of `below` are registered,
/// the layers below first, and that each of `rows` is in the table at its own address with a
/// default and an example its parser accepts. Runs on the test's main thread.
template <typename Register>
void check_layer(std::string_view layer, std::span<const tensorplay::KnobSpec* const> rows,
                 const std::vector<std::string_view>& below, Register register_layer) {
  register_layer();
  register_layer();  // again: a no-op
  const std::vector<std::string_view> layers = tensorplay::knob_layers();
  const auto at = [&](std::string_view name) {
    return std::find(layers.begin(), layers.end(), name) - layers.begin();
  };
  CAPTURE(layer);
  REQUIRE(at(layer) < static_cast<long>(layers.size()));
  for (std::string_view lower : below) {
    CAPTURE(lower);
    CHECK(at(lower) < at(layer));
  }
  CHECK(std::count(layers.begin(), layers.end(), layer) == 1);
  CHECK(!rows.empty());
  for (const tensorplay::KnobSpec* row : rows) {
    const std::string name(row->name);
    CAPTURE(name);
    CHECK(tensorplay::find_knob(row->name) == row);
    if (!row->alias.empty()) CHECK(tensorplay::find_knob(row->alias) == row);
    if (!row->default_text.empty())
      CHECK_NOTHROW(tensorplay::check_knob_text(*row, row->default_text, name));
    CHECK_NOTHROW(tensorplay::check_knob_text(*row, row->example, name));
  }
}

}  // namespace layer_knobs_check
