// The per-rank figures of a simulated step, as text.
#include "tensorplay/schedules/simulation_result.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

namespace tensorplay::schedules {

double SimulationResult::rank_bubble_fraction(int rank) const {
  return makespan > 0 ? idle.at(rank) / makespan : 0.0;
}

std::string format_bytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double value = bytes;
  while (std::abs(value) >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[48];
  if (unit == 0)
    std::snprintf(text, sizeof(text), "%.0f B", value);
  else
    std::snprintf(text, sizeof(text), "%.2f %s", value, kUnits[unit]);
  return text;
}

std::string format_rank_figures(const SimulationResult& result, const std::string& unit) {
  std::ostringstream out;
  const size_t ranks = result.busy.size();
  for (size_t rank = 0; rank < ranks && rank < 64; ++rank)
    out << "  rank " << rank << ": busy " << result.busy[rank] << unit << ", idle "
        << result.idle[rank] << unit << ", peak activations " << result.peak_activations[rank]
        << (rank < result.peak_bytes.size()
                ? ", peak bytes " + format_bytes(result.peak_bytes[rank])
                : std::string())
        << "\n";
  if (ranks > 64) out << "  ... " << ranks - 64 << " more ranks\n";
  return out.str();
}

}  // namespace tensorplay::schedules
