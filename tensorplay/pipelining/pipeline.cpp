// pipeline(): trace, resolve the cuts (spec, pipe_split calls, policy) with clear errors, split.
#include "tensorplay/pipelining/pipeline.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "tensorplay/pipelining/tracer.h"

namespace tensorplay::pipelining {

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  return out;
}

/// Cut position -> what asked for it (for error messages).
using Cuts = std::map<int, std::string>;

void add_spec_cuts(const Graph& g, const SplitSpec& spec, Cuts& cuts) {
  for (const auto& [path, point] : spec) {
    const char* where = point == SplitPoint::Beginning ? "Beginning" : "End";
    std::string origin = "split_spec '" + path + "' (SplitPoint::" + where + ")";
    if (std::find(g.module_paths.begin(), g.module_paths.end(), path) == g.module_paths.end()) {
      std::vector<std::string> paths;
      for (const std::string& p : g.module_paths)
        if (!p.empty()) paths.push_back(p);
      throw std::invalid_argument(
          "pipeline: " + origin + " names no module of the model; " +
          "nearest module paths: " + quoted_list(nearest_paths(path, paths)) +
          " (split_spec keys are dotted paths as named_modules() gives them)");
    }
    auto range = g.module_ranges.find(path);
    if (range == g.module_ranges.end())
      throw std::invalid_argument("pipeline: " + origin + ": the module ran no ops for the " +
                                  "example inputs, so there is nothing to cut before or after");
    int p = point == SplitPoint::Beginning ? range->second.first : range->second.second;
    cuts.emplace(p, origin);
  }
}

std::vector<int> checked_cuts(const Graph& g, const Cuts& cuts) {
  const int n = static_cast<int>(g.nodes.size());
  std::vector<int> out;
  for (const auto& [p, origin] : cuts) {
    if (p <= 0)
      throw std::invalid_argument("pipeline: " + origin +
                                  " cuts before the model's first op, which would leave stage 0 "
                                  "empty; remove that cut");
    if (p >= n)
      throw std::invalid_argument("pipeline: " + origin +
                                  " cuts after the model's last op, which would leave the last "
                                  "stage empty; remove that cut");
    out.push_back(p);
  }
  return out;
}

}  // namespace

std::vector<std::string> nearest_paths(const std::string& path,
                                       const std::vector<std::string>& candidates, size_t count) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string& c : candidates) scored.emplace_back(edit_distance(path, c), c);
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < count; ++i) out.push_back(scored[i].second);
  return out;
}

Pipe pipeline(nn::Module& module, const std::vector<Tensor>& mb_args,
              const nn::TensorDict& mb_kwargs, const PipelineOptions& options) {
  if (!options.split_spec.empty() && options.split_policy)
    throw std::invalid_argument(
        "pipeline: got both a split_spec and a split_policy; pass one of them (a policy chooses "
        "every cut itself)");
  auto graph = std::make_shared<Graph>(trace(module, mb_args, mb_kwargs));
  if (graph->nodes.empty())
    throw std::invalid_argument(
        "pipeline: the model's forward ran no recorded ops; nothing to "
        "split");
  Cuts cuts;
  if (options.split_policy) {
    std::vector<int> chosen = options.split_policy(*graph);
    for (size_t i = 0; i < chosen.size(); ++i) {
      if (i > 0 && chosen[i] <= chosen[i - 1])
        throw std::invalid_argument("pipeline: split_policy returned cuts that do not ascend (" +
                                    std::to_string(chosen[i - 1]) + " then " +
                                    std::to_string(chosen[i]) + ")");
      cuts.emplace(chosen[i], "split_policy cut at op " + std::to_string(chosen[i]) + " of " +
                                  std::to_string(graph->nodes.size()));
    }
  } else {
    for (int p : graph->split_calls)
      cuts.emplace(p, "pipe_split() call at op " + std::to_string(p));
    add_spec_cuts(*graph, options.split_spec, cuts);
  }
  std::vector<int> positions = checked_cuts(*graph, cuts);
  return Pipe(std::move(graph), std::move(positions), module);
}

Pipe pipeline(nn::Module& module, const std::vector<Tensor>& mb_args,
              const PipelineOptions& options) {
  return pipeline(module, mb_args, {}, options);
}

Pipe pipeline(const std::shared_ptr<nn::Module>& module, const std::vector<Tensor>& mb_args,
              const nn::TensorDict& mb_kwargs, const PipelineOptions& options) {
  if (!module) throw std::invalid_argument("pipeline: the module is null");
  return pipeline(*module, mb_args, mb_kwargs, options);
}

Pipe pipeline(const std::shared_ptr<nn::Module>& module, const std::vector<Tensor>& mb_args,
              const PipelineOptions& options) {
  return pipeline(module, mb_args, {}, options);
}

}  // namespace tensorplay::pipelining
