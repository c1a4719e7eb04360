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

// A per-action list may be empty (then transient_bytes stands for it).
void check_optional_list(const std::vector<double>& values, const char* name, std::size_t needed) {
  if (!values.empty()) check_list(values, name, needed);
}

bool all_zero(const std::vector<double>& values) {
  return std::all_of(values.begin(), values.end(), [](double v) { return v == 0; });
}

}  // namespace

bool MemoryCosts::empty() const {
  return all_zero(activation_bytes) && all_zero(recompute_activation_bytes) &&
         all_zero(weight_stash_bytes) && all_zero(transient_bytes) && all_zero(retained_bytes) &&
         all_zero(sent_bytes) && all_zero(fixed_bytes) && all_zero(forward_transient_bytes) &&
         all_zero(input_transient_bytes) && all_zero(weight_transient_bytes) &&
         all_zero(full_backward_transient_bytes) && all_zero(gathered_bytes);
}

double MemoryCosts::of(const std::vector<double>& values, int stage) {
  if (values.empty()) return 0.0;
  return values.size() == 1 ? values[0] : values.at(static_cast<std::size_t>(stage));
}

bool MemoryCosts::recomputes(int stage) const {
  return !recompute.empty() &&
         (recompute.size() == 1 ? recompute[0] : recompute.at(static_cast<std::size_t>(stage))) !=
             0;
}

double MemoryCosts::kept(int stage) const {
  return of(recomputes(stage) ? recompute_activation_bytes : activation_bytes, stage);
}

double MemoryCosts::forward_transient(int stage) const {
  return of(forward_transient_bytes.empty() ? transient_bytes : forward_transient_bytes, stage);
}

double MemoryCosts::input_transient(int stage) const {
  return of(input_transient_bytes.empty() ? transient_bytes : input_transient_bytes, stage);
}

double MemoryCosts::weight_transient(int stage) const {
  return of(weight_transient_bytes.empty() ? transient_bytes : weight_transient_bytes, stage);
}

double MemoryCosts::full_backward_transient(int stage) const {
  if (!full_backward_transient_bytes.empty()) return of(full_backward_transient_bytes, stage);
  return std::max(input_transient(stage), weight_transient(stage));
}

double MemoryCosts::recomputing_forward_transient(int stage) const {
  if (!recompute_forward_transient_bytes.empty())
    return of(recompute_forward_transient_bytes, stage);
  return forward_transient(stage);
}

double MemoryCosts::rebuilding_input_transient(int stage) const {
  if (!recompute_input_transient_bytes.empty()) return of(recompute_input_transient_bytes, stage);
  return input_transient(stage) + of(activation_bytes, stage);
}

double MemoryCosts::rebuilding_full_backward_transient(int stage) const {
  if (!recompute_full_backward_transient_bytes.empty())
    return of(recompute_full_backward_transient_bytes, stage);
  return full_backward_transient(stage) + of(activation_bytes, stage);
}

double MemoryCosts::rebuilding_weight_stash(int stage) const {
  return of(
      recompute_weight_stash_bytes.empty() ? weight_stash_bytes : recompute_weight_stash_bytes,
      stage);
}

bool MemoryCosts::keeps_before_backward(int stage) const {
  if (keep_before_backward.empty()) return true;
  return (keep_before_backward.size() == 1
              ? keep_before_backward[0]
              : keep_before_backward.at(static_cast<std::size_t>(stage))) != 0;
}

std::vector<double> MemoryCosts::workspace_per_stage(int num_stages) const {
  std::vector<double> out;
  for (int s = 0; s < num_stages; ++s) {
    const bool r = recomputes(s);
    out.push_back(std::max({forward_transient(s), input_transient(s), weight_transient(s),
                            full_backward_transient(s), r ? recomputing_forward_transient(s) : 0.0,
                            r ? rebuilding_input_transient(s) : 0.0,
                            r ? rebuilding_full_backward_transient(s) : 0.0}));
  }
  return out;
}

std::vector<double> MemoryCosts::sent_per_stage(int num_stages) const {
  std::vector<double> out;
  for (int s = 0; s < num_stages; ++s) out.push_back(s + 1 < num_stages ? of(sent_bytes, s) : 0.0);
  return out;
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
  check_optional_list(forward_transient_bytes, "forward_transient_bytes", n);
  check_optional_list(input_transient_bytes, "input_transient_bytes", n);
  check_optional_list(weight_transient_bytes, "weight_transient_bytes", n);
  check_optional_list(full_backward_transient_bytes, "full_backward_transient_bytes", n);
  check_optional_list(gathered_bytes, "gathered_bytes", n);
  check_optional_list(recompute_forward_transient_bytes, "recompute_forward_transient_bytes", n);
  check_optional_list(recompute_input_transient_bytes, "recompute_input_transient_bytes", n);
  check_optional_list(recompute_full_backward_transient_bytes,
                      "recompute_full_backward_transient_bytes", n);
  check_optional_list(recompute_weight_stash_bytes, "recompute_weight_stash_bytes", n);
  if (keep_before_backward.size() > 1 && keep_before_backward.size() < n)
    throw std::invalid_argument(
        "memory costs: 'keep_before_backward' has " + std::to_string(keep_before_backward.size()) +
        " values; give none, one, or one per stage (" + std::to_string(n) + ")");
  if (recompute.size() > 1 && recompute.size() < n)
    throw std::invalid_argument(
        "memory costs: 'recompute' has " + std::to_string(recompute.size()) +
        " values; give none, one, or one per stage (" + std::to_string(n) + ")");
}

}  // namespace tensorplay::schedules
