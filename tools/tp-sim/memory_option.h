// tp-sim's --memory option: the memory model's bytes per stage, one value for every stage.
#pragma once

#include <string>

#include "tensorplay/schedules/memory_costs.h"

namespace tensorplay::tools {

/// Parses "act=BYTES,recompute=BYTES,stash=BYTES,transient=BYTES,retained=BYTES,sent=BYTES,
/// fixed=BYTES" (any subset; a value may end in K, M or G for KiB, MiB, GiB;
/// tensorplay/schedules/memory_costs.h). `recompute_all` sets every stage to recompute. Throws
/// std::invalid_argument naming the item that is wrong.
schedules::MemoryCosts parse_memory(const std::string& text, bool recompute_all);

/// "64M" -> 67108864: a byte count with an optional K, M or G suffix; throws naming `what`.
double parse_byte_count(std::string text, const std::string& what);

}  // namespace tensorplay::tools
