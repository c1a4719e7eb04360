// MemoryCosts: per-stage lookups and checks.
#include "tensorplay/schedules/memory_costs.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tensorplay::schedules {
namespace {

void check_list(const std::vector<double>& values, const char* name, std::size_t needed) {
  if (values.empty() || (values.size() != 1 && values.size() < needed))
    throw std::invalid_argument(
        std::string("memory costs: '") + name + "' has " + std::to_string(values.size()) +
        " values; give one value or one per stage (" + std::to_string(needed) + ")");
  if (std::any_of(values.begin(), values.end(), [](double v) { return v < 0; }))
    throw std::invalid_argument(std::string("memory costs: '") + name +
                                "' has a negative value; bytes are >= 0");
}

bool all_zero(const std::vector<double>& values) {
  return std::all_of(values.begin(), values.end(), [](double v) { return v == 0; });
}

}  // namespace

bool MemoryCosts::empty() const {
  return all_zero(activation_bytes) && all_zero(recompute_activation_bytes) &&
         all_zero(weight_stash_bytes) && all_zero(transient_bytes) && all_zero(retained_bytes) &&
         all_zero(sent_bytes) && all_zero(fixed_bytes);
}

double MemoryCosts::of(const std::vector<double>& values, int stage) {
  if (values.empty()) return 0.0;
  return values.size() == 1 ? values[0] : values.at(static_cast<std::size_t>(stage));
}

double MemoryCosts::kept(int stage) const {
  const bool recomputes =
      !recompute.empty() &&
      (recompute.size() == 1 ? recompute[0] : recompute.at(static_cast<std::size_t>(stage))) != 0;
  return of(recomputes ? recompute_activation_bytes : activation_bytes, stage);
}

std::vector<double> MemoryCosts::kept_per_stage(int num_stages) const {
  std::vector<double> out;
  for (int s = 0; s < num_stages; ++s) out.push_back(kept(s));
  return out;
}

void MemoryCosts::check(int num_stages) const {
  const std::size_t n = static_cast<std::size_t>(std::max(num_stages, 1));
  check_list(activation_bytes, "activation_bytes", n);
  check_list(recompute_activation_bytes, "recompute_activation_bytes", n);
  check_list(weight_stash_bytes, "weight_stash_bytes", n);
  check_list(transient_bytes, "transient_bytes", n);
  check_list(retained_bytes, "retained_bytes", n);
  check_list(sent_bytes, "sent_bytes", n);
  check_list(fixed_bytes, "fixed_bytes", n);
  if (recompute.size() > 1 && recompute.size() < n)
    throw std::invalid_argument(
        "memory costs: 'recompute' has " + std::to_string(recompute.size()) +
        " values; give none, one, or one per stage (" + std::to_string(n) + ")");
}

}  // namespace tensorplay::schedules
