// Test helper: a pipeline order as one line of text per rank, for comparing orders in tests.
#pragma once

#include <string>
#include <vector>

#include "tensorplay/schedules/action.h"

namespace schedules_test {

/// to_string of each rank's actions ("0F0 0F1 ...").
inline std::vector<std::string> rows(const tensorplay::schedules::PipelineOrder& order) {
  std::vector<std::string> out;
  for (const auto& rank : order) out.push_back(tensorplay::schedules::to_string(rank));
  return out;
}

}  // namespace schedules_test
