// Built-in split policies: balanced prefix sums over per-node weights.
#include "tensorplay/pipelining/split_policy.h"

#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

namespace tensorplay::pipelining {

std::vector<int> balanced_cuts(const Graph& graph, const std::vector<double>& weights,
                               int num_stages) {
  const int n = static_cast<int>(graph.nodes.size());
  if (num_stages < 1)
    throw std::invalid_argument("split policy: the number of stages must be at least 1, got " +
                                std::to_string(num_stages));
  if (num_stages > n)
    throw std::invalid_argument("split policy: cannot cut a graph of " + std::to_string(n) +
                                " ops into " + std::to_string(num_stages) + " non-empty stages");
  if (static_cast<int>(weights.size()) != n)
    throw std::invalid_argument("balanced_cuts: got " + std::to_string(weights.size()) +
                                " weights for " + std::to_string(n) + " nodes");
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + weights[i];
  const double total = prefix[n];
  const double tolerance = 1e-9 * std::max(total, 1.0);
  std::vector<int> crossing = graph.crossing_counts();
  std::vector<int> cuts;
  int previous = 0;
  // A boundary within kSlack of a stage's share of the best balance is as good as the best:
  // among those the narrowest wins (fewest values to send), then the closest, then the latest.
  constexpr double kSlack = 0.05;
  const double slack = kSlack * total / num_stages + tolerance;
  for (int k = 1; k < num_stages; ++k) {
    const double target = total * k / num_stages;
    // Leave at least one node for this stage and for each stage after it.
    const int first = previous + 1, last = n - (num_stages - k);
    double best_error = std::numeric_limits<double>::infinity();
    for (int p = first; p <= last; ++p)
      best_error = std::min(best_error, std::abs(prefix[p] - target));
    int best = -1;
    for (int p = first; p <= last; ++p) {
      double error = std::abs(prefix[p] - target);
      if (error > best_error + slack) continue;
      bool take =
          best < 0 || crossing[p] < crossing[best] ||
          (crossing[p] == crossing[best] && error <= std::abs(prefix[best] - target) + tolerance);
      if (take) best = p;
    }
    cuts.push_back(best);
    previous = best;
  }
  return cuts;
}

SplitPolicy split_by_parameter_count(int num_stages) {
  return [num_stages](const Graph& g) {
    std::vector<double> weights(g.nodes.size(), 0.0);
    std::set<int> seen;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (int v : g.parameters_of(static_cast<int>(i)))
        if (g.values[v].kind == ValueKind::Parameter && seen.insert(v).second)
          weights[i] += static_cast<double>(numel(g.values[v].meta.shape));
    return balanced_cuts(g, weights, num_stages);
  };
}

double estimate_flops(const Graph& g, int n) {
  const Node& node = g.nodes.at(n);
  const Shape& out = g.values[node.output].meta.shape;
  const double out_numel = static_cast<double>(numel(out));
  auto in_shape = [&](size_t i) -> const Shape* {
    if (i >= node.inputs.size() || node.inputs[i] < 0) return nullptr;
    return &g.values[node.inputs[i]].meta.shape;
  };
  const std::string& op = node.op;
  if (op == "linear" || op == "matmul" || op == "bmm" || op == "mm") {
    const Shape* a = in_shape(0);
    double k = a && !a->empty() ? static_cast<double>(a->back()) : 1.0;
    return 2.0 * out_numel * k;
  }
  if (op.find("attention") != std::string::npos) {
    // q: [..., T, D]; scores and the weighted sum are each 2*T*T*D per head.
    const Shape* q = in_shape(0);
    if (q && q->size() >= 2) {
      double t = static_cast<double>((*q)[q->size() - 2]);
      return 4.0 * static_cast<double>(numel(*q)) * t;
    }
    return out_numel;
  }
  if (op == "reshape" || op == "slice0" || op == "view" || op == "detach") return 0.0;
  if (op.find("norm") != std::string::npos || op.find("softmax") != std::string::npos ||
      op == "gelu" || op == "tanh" || op == "exp" || op == "log" || op == "cross_entropy")
    return 5.0 * out_numel;
  return out_numel;
}

SplitPolicy split_by_cost(int num_stages) {
  return [num_stages](const Graph& g) {
    std::vector<double> weights(g.nodes.size());
    for (size_t i = 0; i < g.nodes.size(); ++i) weights[i] = estimate_flops(g, static_cast<int>(i));
    return balanced_cuts(g, weights, num_stages);
  };
}

}  // namespace tensorplay::pipelining
