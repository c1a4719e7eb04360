// Graph IR helpers and printing.
#include "tensorplay/pipelining/graph.h"

#include <algorithm>
#include <set>

namespace tensorplay::pipelining {

const char* to_string(ValueKind kind) {
  switch (kind) {
    case ValueKind::Input:
      return "input";
    case ValueKind::Parameter:
      return "parameter";
    case ValueKind::Buffer:
      return "buffer";
    case ValueKind::Constant:
      return "constant";
    case ValueKind::Result:
      return "result";
  }
  return "?";
}

std::vector<int> Graph::parameters_of(int n) const {
  std::vector<int> out;
  for (int v : nodes.at(n).inputs) {
    if (v < 0) continue;
    ValueKind k = values[v].kind;
    if ((k == ValueKind::Parameter || k == ValueKind::Buffer) &&
        std::find(out.begin(), out.end(), v) == out.end())
      out.push_back(v);
  }
  return out;
}

std::vector<int> Graph::crossing_counts() const {
  const int n = static_cast<int>(nodes.size());
  // A value made at position `made` and last needed by the node at `last` crosses every cut p
  // with made <= p <= last; a forward output is needed at the very end (position n).
  std::vector<int> last_use(values.size(), -1);
  for (int i = 0; i < n; ++i)
    for (int v : nodes[i].inputs)
      if (v >= 0) last_use[v] = std::max(last_use[v], i);
  for (int v : outputs) last_use[v] = n;
  std::vector<int> delta(n + 2, 0);
  for (size_t v = 0; v < values.size(); ++v) {
    int made;
    if (values[v].kind == ValueKind::Input) {
      made = 0;
    } else if (values[v].kind == ValueKind::Result) {
      made = values[v].index + 1;
    } else {
      continue;  // parameters, buffers and constants live where they are read
    }
    if (last_use[v] < made) continue;
    delta[made] += 1;
    delta[last_use[v] + 1] -= 1;
  }
  std::vector<int> counts(n + 1);
  int running = 0;
  for (int p = 0; p <= n; ++p) counts[p] = running += delta[p];
  return counts;
}

int64_t Graph::parameter_numel() const {
  int64_t total = 0;
  for (const Value& v : values)
    if (v.kind == ValueKind::Parameter) total += numel(v.meta.shape);
  return total;
}

std::string value_ref(const Graph& g, int v) {
  if (v < 0) return "None";
  const Value& val = g.values[v];
  if (val.kind == ValueKind::Result) return "%" + std::to_string(val.index);
  return val.name;
}

std::ostream& operator<<(std::ostream& os, const Graph& g) {
  os << "graph(";
  for (size_t i = 0; i < g.inputs.size(); ++i)
    os << (i ? ", " : "") << g.values[g.inputs[i]].name << ": "
       << to_string(g.values[g.inputs[i]].meta);
  os << ") {\n";
  std::set<int> splits(g.split_calls.begin(), g.split_calls.end());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (splits.count(static_cast<int>(i))) os << "  -- pipe_split() --\n";
    const Node& node = g.nodes[i];
    os << "  %" << i << " = " << node.op << "(";
    for (size_t k = 0; k < node.inputs.size(); ++k)
      os << (k ? ", " : "") << value_ref(g, node.inputs[k]);
    os << ")  " << to_string(g.values[node.output].meta);
    if (!node.module_path.empty()) os << "  @" << node.module_path;
    os << "\n";
  }
  os << "  return ";
  for (size_t i = 0; i < g.outputs.size(); ++i) os << (i ? ", " : "") << value_ref(g, g.outputs[i]);
  return os << "\n}";
}

}  // namespace tensorplay::pipelining
