// Split policies: callables that choose where to cut a traced graph, and the two built-ins
// (equal parameter count, equal estimated cost).
#pragma once

#include <functional>
#include <vector>

#include "tensorplay/pipelining/graph.h"

namespace tensorplay::pipelining {

/// Chooses the cut positions of a traced graph: ascending positions p with
/// 0 < p < graph.nodes.size() (cutting at p puts nodes [.., p) and [p, ..) in different stages).
/// The result is the complete set of cuts: a policy that wants the model's pipe_split() calls
/// too reads them from graph.split_calls.
using SplitPolicy = std::function<std::vector<int>(const Graph&)>;

/// Cuts into `num_stages` stages holding about the same number of parameter elements (each
/// parameter counted at its first reader). See balanced_cuts for how ties are broken.
SplitPolicy split_by_parameter_count(int num_stages);

/// Cuts into `num_stages` stages of about the same estimated cost (estimate_flops).
SplitPolicy split_by_cost(int num_stages);

/// Estimated floating-point operations of node `n`: 2*m*n*k for linear and matmul, 4*B*H*T*T*D
/// for attention, nothing for views (reshape, slice0), a few per element for normalisations and
/// transcendental activations, one per output element otherwise.
double estimate_flops(const Graph& graph, int n);

/// Cut positions splitting per-node `weights` into `num_stages` runs of near-equal sums, every
/// stage non-empty. Each cut aims at k/num_stages of the total; positions within 5% of a
/// stage's share of the best balance count as equally good, and among them the boundary with
/// the fewest values crossing it wins (between layers rather than inside one), then the one
/// closest to the target, then the later one (just before the next layer).
std::vector<int> balanced_cuts(const Graph& graph, const std::vector<double>& weights,
                               int num_stages);

}  // namespace tensorplay::pipelining
