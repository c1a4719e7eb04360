#include "schedules/cost_model.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tensorplay::schedules {
namespace {

double at(const std::vector<double>& values, int stage) {
  return values.size() == 1 ? values[0] : values[static_cast<std::size_t>(stage)];
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
      return at(forward, action.stage);
    case ActionKind::BackwardInput:
      return at(input_backward, action.stage);
    case ActionKind::BackwardWeight:
      return at(weight_backward, action.stage);
    case ActionKind::FullBackward:
      return at(input_backward, action.stage) + at(weight_backward, action.stage);
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
  return recompute_ahead.empty() ? 0.0 : at(recompute_ahead, stage);
}

double CostModel::recomputation(int stage) const {
  return recompute.empty() ? 0.0 : at(recompute, stage);
}

double CostModel::transfer_time(int stage) const {
  double bytes = at(boundary_bytes, stage);
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
  for (int s = 0; s < num_stages; ++s) {
    const char* longer = ahead(s) > at(input_backward, s)           ? "recompute_ahead"
                         : recomputation(s) > at(input_backward, s) ? "recompute"
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
