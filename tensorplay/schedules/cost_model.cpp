#include "tensorplay/schedules/cost_model.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tensorplay::schedules {
namespace {

// The value of `values` (the list called `name`) for `stage`: a single value is every stage's.
// Bounds-checked, so that a list shorter than the pipeline fails with its name instead of being
// read past its end (check() gives the clearer message up front; this guards every lookup).
double at(const std::vector<double>& values, int stage, const char* name) {
  if (values.size() == 1) return values[0];
  if (stage < 0 || static_cast<std::size_t>(stage) >= values.size())
    throw std::invalid_argument(std::string("cost model: '") + name + "' has " +
                                std::to_string(values.size()) + " values, none for stage " +
                                std::to_string(stage) + "; give one value or one per stage");
  return values[static_cast<std::size_t>(stage)];
}

void check_list(const std::vector<double>& values, const char* name, std::size_t needed) {
  if (values.empty() || (values.size() != 1 && values.size() < needed)) {
    throw std::invalid_argument(std::string("cost model: '") + name + "' has " +
                                std::to_string(values.size()) +
                                " values; give one value or one "
                                "per stage (" +
                                std::to_string(needed) + ")");
  }
  if (std::any_of(values.begin(), values.end(), [](double v) { return v < 0; })) {
    throw std::invalid_argument(std::string("cost model: '") + name + "' has a negative value");
  }
}

}  // namespace

CostModel CostModel::uniform(double forward, double input_backward, double weight_backward) {
  CostModel model;
  model.forward = {forward};
  model.input_backward = {input_backward};
  model.weight_backward = {weight_backward};
  return model;
}

double CostModel::duration(const Action& action) const {
  switch (action.kind) {
    case ActionKind::Forward:
      return at(forward, action.stage, "forward");
    case ActionKind::BackwardInput:
      return at(input_backward, action.stage, "input_backward");
    case ActionKind::BackwardWeight:
      return at(weight_backward, action.stage, "weight_backward");
    case ActionKind::FullBackward:
      return at(input_backward, action.stage, "input_backward") +
             at(weight_backward, action.stage, "weight_backward");
    case ActionKind::Unshard:
      return all_gather.empty() ? 0.0 : at(all_gather, action.stage, "all_gather");
    case ActionKind::ReduceGrad:
      return reduce_scatter.empty() ? 0.0 : at(reduce_scatter, action.stage, "reduce_scatter");
    case ActionKind::OverlapFB: {
      double sum = 0;
      for (const Action& sub : action.sub_actions) sum += duration(sub);
      return overlap_factor * sum;
    }
    default:
      return 0.0;
  }
}

double CostModel::ahead(int stage) const {
  return recompute_ahead.empty() ? 0.0 : at(recompute_ahead, stage, "recompute_ahead");
}

double CostModel::recomputation(int stage) const {
  return recompute.empty() ? 0.0 : at(recompute, stage, "recompute");
}

double CostModel::transfer_time(int stage) const {
  double bytes = at(boundary_bytes, stage, "boundary_bytes");
  return latency + (bandwidth > 0 ? bytes / bandwidth : 0.0);
}

void CostModel::check(int num_stages) const {
  std::size_t n = static_cast<std::size_t>(std::max(num_stages, 1));
  check_list(forward, "forward", n);
  check_list(input_backward, "input_backward", n);
  check_list(weight_backward, "weight_backward", n);
  check_list(boundary_bytes, "boundary_bytes", n > 1 ? n - 1 : 1);
  if (!recompute_ahead.empty()) check_list(recompute_ahead, "recompute_ahead", n);
  if (!recompute.empty()) check_list(recompute, "recompute", n);
  if (!all_gather.empty()) check_list(all_gather, "all_gather", n);
  if (!reduce_scatter.empty()) check_list(reduce_scatter, "reduce_scatter", n);
  for (int s = 0; s < num_stages; ++s) {
    const double input = at(input_backward, s, "input_backward");
    const char* longer = ahead(s) > input           ? "recompute_ahead"
                         : recomputation(s) > input ? "recompute"
                                                    : nullptr;
    if (longer)
      throw std::invalid_argument("cost model: stage " + std::to_string(s) + "'s " + longer +
                                  " is longer than its input_backward, of which it is a part");
  }
  if (overlap_factor < 0 || latency < 0 || bandwidth < 0) {
    throw std::invalid_argument("cost model: overlap_factor, latency and bandwidth must be >= 0");
  }
}

}  // namespace tensorplay::schedules
