#include "tensorplay/schedules/format.h"

#include <algorithm>

namespace tensorplay::schedules {

std::string format_pipeline_order(const SteppedOrder& order, int error_step) {
  std::size_t steps = 0;
  for (const auto& rank : order) steps = std::max(steps, rank.size());
  const std::size_t label_digits = std::to_string(steps == 0 ? 0 : steps - 1).size();

  // Column widths: the wider of "Rank r" and the longest action of that rank.
  std::vector<std::vector<std::string>> cells(order.size());
  std::vector<std::size_t> widths(order.size());
  for (std::size_t r = 0; r < order.size(); ++r) {
    widths[r] = ("Rank " + std::to_string(r)).size();
    for (const auto& action : order[r]) {
      cells[r].push_back(action ? to_string(*action) : "");
      widths[r] = std::max(widths[r], cells[r].back().size());
    }
  }
  auto pad = [](std::string text, std::size_t width) {
    text.resize(std::max(width, text.size()), ' ');
    return text;
  };

  std::string table(label_digits + 7, ' ');  // "Step " + digits + ": "
  for (std::size_t r = 0; r < order.size(); ++r) {
    table += pad("Rank " + std::to_string(r), widths[r]);
    table += r + 1 < order.size() ? " " : "";
  }
  table += '\n';
  for (std::size_t step = 0; step < steps; ++step) {
    std::string number = std::to_string(step);
    std::string row = "Step " + std::string(label_digits - number.size(), '0') + number + ": ";
    for (std::size_t r = 0; r < order.size(); ++r) {
      row += pad(step < cells[r].size() ? cells[r][step] : "", widths[r]);
      row += r + 1 < order.size() ? " " : "";
    }
    if (static_cast<int>(step) == error_step) row += " <-- ERROR HERE";
    table += row + '\n';
  }
  return table;
}

std::string format_pipeline_order(const PipelineOrder& order, int error_step) {
  SteppedOrder stepped(order.size());
  for (std::size_t r = 0; r < order.size(); ++r) {
    stepped[r].assign(order[r].begin(), order[r].end());
  }
  return format_pipeline_order(stepped, error_step);
}

std::string describe_blocked_ranks(const PipelineOrder& order, const std::vector<int>& next) {
  std::string stuck;
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    if (next[rank] < static_cast<int>(order[rank].size())) {
      stuck += "\n  rank " + std::to_string(rank) + " waits to run " +
               to_string(order[rank][next[rank]]);
    }
  }
  return stuck;
}

}  // namespace tensorplay::schedules
