// tp-sim's --memory parser.
#include "tools/tp-sim/memory_option.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>

#include "tools/cli_checks.h"

namespace tensorplay::tools {
double parse_byte_count(std::string text, const std::string& what) {
  double scale = 1;
  if (!text.empty()) {
    const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
    if (unit == 'K' || unit == 'M' || unit == 'G') {
      scale = unit == 'K' ? 1024.0 : unit == 'M' ? 1024.0 * 1024 : 1024.0 * 1024 * 1024;
      text.pop_back();
    }
  }
  const double value = parse_number(text, what);
  require_finite_nonnegative(value, what);
  return value * scale;
}

schedules::MemoryCosts parse_memory(const std::string& text, bool recompute_all) {
  schedules::MemoryCosts costs;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("--memory item '" + item +
                                  "' is not KEY=BYTES (e.g. act=64M,fixed=1G)");
    std::string key = item.substr(0, eq);
    std::transform(key.begin(), key.end(), key.begin(), ::tolower);
    const double bytes = parse_byte_count(item.substr(eq + 1), "--memory " + key);
    if (key == "act")
      costs.activation_bytes = {bytes};
    else if (key == "recompute")
      costs.recompute_activation_bytes = {bytes};
    else if (key == "stash")
      costs.weight_stash_bytes = {bytes};
    else if (key == "transient")
      costs.transient_bytes = {bytes};
    else if (key == "retained")
      costs.retained_bytes = {bytes};
    else if (key == "sent")
      costs.sent_bytes = {bytes};
    else if (key == "fixed")
      costs.fixed_bytes = {bytes};
    else
      throw std::invalid_argument(
          "--memory key '" + key +
          "' is not one of act, recompute, stash, transient, retained, sent, fixed");
  }
  costs.recompute = {recompute_all ? 1 : 0};
  return costs;
}

}  // namespace tensorplay::tools
