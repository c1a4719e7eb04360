// The process's table of knobs, filled by the layers: each registers its own rows through an
// explicit call, so that the table printed by tp-launch --print-config holds every layer's.
#pragma once

#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "tensorplay/base/knob_spec.h"

namespace tensorplay::inline base {

/// Adds one layer's rows to the table, after those already there. Registering a layer again is a
/// no-op, so each layer's registration may call those of the layers below it. Throws
/// std::logic_error when a row's name or old name is already another row's (naming both layers).
void register_knobs(std::string_view layer, std::span<const KnobSpec* const> rows);

/// Every registered row, layer by layer in the order they registered.
std::vector<std::reference_wrapper<const KnobSpec>> knob_table();

/// The registered row named `name` (its name or its old name), or null.
const KnobSpec* find_knob(std::string_view name);

/// The layers registered so far, in their order.
std::vector<std::string_view> knob_layers();

}  // namespace tensorplay::inline base
