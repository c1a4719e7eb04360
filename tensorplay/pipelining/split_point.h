// SplitPoint and SplitSpec: where a stage boundary falls relative to a submodule named in a
// split_spec (before its first op or after its last).
#pragma once

#include <map>
#include <string>

namespace tensorplay::pipelining {

/// Cut before the module's first op (Beginning) or after its last op (End).
enum class SplitPoint { Beginning, End };

/// Module path ("layers.4", "blocks.2") -> where to cut relative to it.
using SplitSpec = std::map<std::string, SplitPoint>;

}  // namespace tensorplay::pipelining
