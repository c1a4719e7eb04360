#include "tensorplay/schedules/sharding_actions.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

namespace tensorplay::schedules {
namespace {

// Calls `visit(part)` for the action itself, or for each part of an OVERLAP_F_B.
template <typename Visit>
void for_each_part(const Action& action, Visit visit) {
  if (action.sub_actions.empty()) {
    visit(action);
    return;
  }
  for (const Action& part : action.sub_actions) visit(part);
}

// Where a sharded stage's actions go in one rank's order: before `first`, after `last`.
struct Span {
  std::size_t first = 0;
  std::size_t last = 0;
  bool has_weight_grad = false;
};

RankOrder add_to_rank(const RankOrder& order, const std::vector<int>& sharded) {
  auto wanted = [&](int stage) {
    return sharded.empty() || std::find(sharded.begin(), sharded.end(), stage) != sharded.end();
  };
  std::map<int, Span> spans;
  for (std::size_t i = 0; i < order.size(); ++i) {
    for_each_part(order[i], [&](const Action& part) {
      if (!is_compute(part.kind) || !wanted(part.stage)) return;
      auto [it, inserted] = spans.emplace(part.stage, Span{i, i, false});
      if (frees_activation(part.kind)) {
        it->second.last = i;
        it->second.has_weight_grad = true;
      } else if (!it->second.has_weight_grad) {
        it->second.last = i;
      }
    });
  }
  RankOrder out;
  out.reserve(order.size() + 3 * spans.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    for (const auto& [stage, span] : spans)
      if (span.first == i) out.push_back(make_action(stage, ActionKind::Unshard, 0));
    out.push_back(order[i]);
    for (const auto& [stage, span] : spans) {
      if (span.last != i) continue;
      out.push_back(make_action(stage, ActionKind::ReduceGrad, 0));
      out.push_back(make_action(stage, ActionKind::Reshard, 0));
    }
  }
  return out;
}

}  // namespace

PipelineOrder strip_sharding(const PipelineOrder& order) {
  PipelineOrder out(order.size());
  for (std::size_t r = 0; r < order.size(); ++r) {
    for (const Action& a : order[r])
      if (!is_sharding(a.kind)) out[r].push_back(a);
  }
  return out;
}

PipelineOrder add_sharding_actions(const PipelineOrder& compute_order,
                                   const std::vector<int>& sharded_stages) {
  for (int stage : sharded_stages) {
    if (stage < 0) {
      throw std::invalid_argument("add_sharding_actions: sharded stage " + std::to_string(stage) +
                                  " is negative; list stage indices from 0");
    }
  }
  PipelineOrder order = strip_sharding(compute_order);
  for (RankOrder& rank : order) rank = add_to_rank(rank, sharded_stages);
  return order;
}

}  // namespace tensorplay::schedules
