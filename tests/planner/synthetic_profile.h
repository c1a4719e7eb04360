// Profiles written by hand for the planner's tests: costs whose optimum can be worked out on
// paper.
#pragma once

#include <vector>

#include "tensorplay/pipelining/planner/profile.h"

namespace planner_test {

/// `forward.size()` segments ("", "blocks.1", ...) of the given F; I = W = F, B = 2F; each keeps
/// `activation` bytes per sample (`recomputed` under recomputation); microbatch size 1.
inline tensorplay::pipelining::Profile synthetic(const std::vector<double>& forward,
                                                 double activation = 0, double recomputed = 0) {
  tensorplay::pipelining::Profile p;
  p.model = "synthetic";
  p.microbatch_size = 1;
  p.cores = 2;  // one core per rank of a two-rank pipeline
  for (size_t i = 0; i < forward.size(); ++i) {
    tensorplay::pipelining::SegmentProfile s;
    s.name = i == 0 ? "" : "blocks." + std::to_string(i);
    s.forward = forward[i];
    s.input_backward = forward[i];
    s.weight_backward = forward[i];
    s.full_backward = 2 * forward[i];
    s.activation_bytes = activation;
    s.activation_bytes_recompute = recomputed;
    p.segments.push_back(s);
  }
  p.channels.push_back({"in_process", 0.0, 0.0});
  return p;
}

}  // namespace planner_test
