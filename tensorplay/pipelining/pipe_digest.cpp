// PipeDigest: a Pipe described line by line, its text form and hash, and the first difference
// between two of them in words.
#include "tensorplay/pipelining/pipe_digest.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "tensorplay/core/detail/fnv1a.h"
#include "tensorplay/pipelining/graph.h"
#include "tensorplay/pipelining/stage_module.h"

namespace tensorplay::pipelining {

namespace {

constexpr std::string_view kHeader = "pipe-digest 1";

/// `text` on one line (encode() separates entries by newlines).
std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

std::string named(const std::string& name, const TensorMeta& meta) {
  return one_line(name + " " + compact_string(meta));
}

std::string node_line(const Graph& g, size_t n) {
  const Node& node = g.nodes[n];
  std::string line = value_ref(g, node.output) + " = " + node.op + "(";
  for (size_t k = 0; k < node.inputs.size(); ++k)
    line += (k ? ", " : "") + value_ref(g, node.inputs[k]);
  line += ") " + compact_string(g.values[node.output].meta);
  if (!node.module_path.empty()) line += " @" + node.module_path;
  return one_line(std::move(line));
}

/// What begins at node `n`: the outermost module whose first node it is, else the node itself.
std::string begins_at(const Graph& g, int n) {
  std::string best;
  for (const auto& [path, range] : g.module_ranges)
    if (!path.empty() && range.first == n && (best.empty() || path.size() < best.size()))
      best = path;
  if (!best.empty()) return one_line(best);
  const Node& node = g.nodes.at(n);
  return one_line("node " + std::to_string(n) + " (" + node.op +
                  (node.module_path.empty() ? "" : " in " + node.module_path) + ")");
}

/// The first entry where `a` and `b` differ: "<what> X on A, Y on B"; empty when equal.
std::string list_difference(const std::string& what, const std::vector<std::string>& a,
                            const std::string& a_rank, const std::vector<std::string>& b,
                            const std::string& b_rank) {
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (i < a.size() && i < b.size() && a[i] == b[i]) continue;
    auto entry = [i](const std::vector<std::string>& v) {
      return i < v.size() ? v[i] : std::string("nothing more");
    };
    return what + " " + entry(a) + " on " + a_rank + ", " + entry(b) + " on " + b_rank;
  }
  return {};
}

}  // namespace

uint64_t digest_hash(std::string_view bytes) { return tensorplay::detail::fnv1a64(bytes); }

PipeDigest digest_of(const Graph& g, const std::vector<int>& cuts,
                     const std::vector<const StageModule*>& stages) {
  PipeDigest d;
  for (int v : g.inputs) d.inputs.push_back(named(g.values[v].name, g.values[v].meta));
  for (size_t n = 0; n < g.nodes.size(); ++n) d.nodes.push_back(node_line(g, n));
  for (int c : cuts) d.cuts.push_back({c, begins_at(g, c)});
  for (const StageModule* stage_module : stages) {
    const StageModule& module = *stage_module;
    PipeDigest::Stage stage;
    const auto in_names = module.input_names(), out_names = module.output_names();
    const auto in_meta = module.input_meta(), out_meta = module.output_meta();
    for (size_t i = 0; i < in_names.size(); ++i)
      stage.receives.push_back(named(in_names[i], in_meta[i]));
    for (size_t i = 0; i < out_names.size(); ++i)
      stage.sends.push_back(named(out_names[i], out_meta[i]));
    for (const StagePlan::State& state : module.plan().state)
      stage.holds.push_back(named(g.values[state.value].name, g.values[state.value].meta));
    d.stages.push_back(std::move(stage));
  }
  return d;
}

std::string PipeDigest::encode() const {
  std::string out(kHeader);
  out += '\n';
  for (const std::string& s : inputs) out += "input " + s + '\n';
  for (const std::string& s : nodes) out += "node " + s + '\n';
  for (const Cut& c : cuts) out += "cut " + std::to_string(c.node) + ' ' + c.before + '\n';
  for (const Stage& stage : stages) {
    out += "stage\n";
    for (const std::string& s : stage.receives) out += "receives " + s + '\n';
    for (const std::string& s : stage.sends) out += "sends " + s + '\n';
    for (const std::string& s : stage.holds) out += "holds " + s + '\n';
  }
  return out;
}

PipeDigest PipeDigest::decode(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string line;
  if (!std::getline(in, line) || line != kHeader)
    throw std::invalid_argument("PipeDigest::decode: not a pipe digest (no '" +
                                std::string(kHeader) + "' line)");
  PipeDigest d;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    const std::string key = line.substr(0, space);
    const std::string rest = space == std::string::npos ? "" : line.substr(space + 1);
    if (key == "stage") {
      d.stages.emplace_back();
    } else if (key == "input") {
      d.inputs.push_back(rest);
    } else if (key == "node") {
      d.nodes.push_back(rest);
    } else if (key == "cut") {
      const size_t gap = rest.find(' ');
      if (gap == std::string::npos)
        throw std::invalid_argument("PipeDigest::decode: a cut without its node: '" + line + "'");
      d.cuts.push_back({std::stoi(rest.substr(0, gap)), rest.substr(gap + 1)});
    } else if ((key == "receives" || key == "sends" || key == "holds") && !d.stages.empty()) {
      Stage& s = d.stages.back();
      (key == "receives" ? s.receives : key == "sends" ? s.sends : s.holds).push_back(rest);
    } else {
      throw std::invalid_argument("PipeDigest::decode: unexpected line '" + line + "'");
    }
  }
  return d;
}

uint64_t PipeDigest::hash() const { return digest_hash(encode()); }

std::string cut_difference(const PipeDigest& a, const std::string& a_rank, const PipeDigest& b,
                           const std::string& b_rank) {
  if (a.cuts.size() != b.cuts.size())
    return a_rank + " cuts the model into " + std::to_string(a.cuts.size() + 1) + " stages, " +
           b_rank + " into " + std::to_string(b.cuts.size() + 1);
  for (size_t i = 0; i < a.cuts.size(); ++i)
    if (a.cuts[i].before != b.cuts[i].before)
      return a_rank + " cuts before " + a.cuts[i].before + ", " + b_rank + " before " +
             b.cuts[i].before + " (where stage " + std::to_string(i + 1) + " begins)";
  return {};
}

std::string first_difference(const PipeDigest& a, const std::string& a_rank, const PipeDigest& b,
                             const std::string& b_rank) {
  if (std::string d = cut_difference(a, a_rank, b, b_rank); !d.empty()) return d;
  const size_t stages = std::min(a.stages.size(), b.stages.size());
  for (size_t s = 0; s < stages; ++s) {
    const std::string stage = "stage " + std::to_string(s);
    const PipeDigest::Stage &x = a.stages[s], &y = b.stages[s];
    if (std::string d =
            list_difference(stage + " receives", x.receives, a_rank, y.receives, b_rank);
        !d.empty())
      return d;
    if (std::string d = list_difference(stage + " sends", x.sends, a_rank, y.sends, b_rank);
        !d.empty())
      return d;
  }
  for (size_t s = 0; s < stages; ++s) {
    const std::string what = "stage " + std::to_string(s) + " holds";
    if (std::string d = list_difference(what, a.stages[s].holds, a_rank, b.stages[s].holds, b_rank);
        !d.empty())
      return d;
  }
  if (std::string d = list_difference("the model's inputs are", a.inputs, a_rank, b.inputs, b_rank);
      !d.empty())
    return d;
  for (size_t n = 0; n < std::max(a.nodes.size(), b.nodes.size()); ++n) {
    if (n < a.nodes.size() && n < b.nodes.size() && a.nodes[n] == b.nodes[n]) continue;
    auto node = [n](const PipeDigest& p) {
      return n < p.nodes.size() ? "'" + p.nodes[n] + "'" : std::string("no node");
    };
    return "the traced graphs differ at node " + std::to_string(n) + ": " + node(a) + " on " +
           a_rank + ", " + node(b) + " on " + b_rank;
  }
  for (size_t i = 0; i < a.cuts.size(); ++i)
    if (a.cuts[i].node != b.cuts[i].node)
      return a_rank + " cuts before node " + std::to_string(a.cuts[i].node) + ", " + b_rank +
             " before node " + std::to_string(b.cuts[i].node);
  return {};
}

}  // namespace tensorplay::pipelining
