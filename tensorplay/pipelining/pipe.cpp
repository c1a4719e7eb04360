// Pipe: partitions a traced graph into stage plans and builds the stage modules.
#include "tensorplay/pipelining/pipe.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "tensorplay/core/ops/conversion.h"
#include "tensorplay/pipelining/pipe_digest.h"
#include "tensorplay/pipelining/tracer.h"

namespace tensorplay::pipelining {

namespace {

Tensor fresh_copy(const Tensor& t) {
  Tensor out = empty(t.shape(), {.dtype = t.dtype(), .device = t.device()});
  out.copy_(t);
  if (t.requires_grad()) out.set_requires_grad(true);
  return out;
}

bool is_state(ValueKind k) { return k == ValueKind::Parameter || k == ValueKind::Buffer; }
bool is_sent(ValueKind k) { return k == ValueKind::Input || k == ValueKind::Result; }

/// Every ancestor of a dotted path, then the path: "a.b" -> "", "a", "a.b".
void add_with_ancestors(const std::string& path, std::set<std::string>& out) {
  out.insert("");
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', dot + 1))
    out.insert(path.substr(0, dot));
  out.insert(path);
}

std::string owner_of(const std::string& name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot);
}

}  // namespace

namespace {

uint64_t next_pipe_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

void check_cuts(const std::vector<int>& cuts, int num_nodes) {
  for (size_t i = 0; i < cuts.size(); ++i)
    if (cuts[i] <= 0 || cuts[i] >= num_nodes || (i > 0 && cuts[i] <= cuts[i - 1]))
      throw std::invalid_argument("Pipe: cut positions must ascend within (0, " +
                                  std::to_string(num_nodes) + ")");
}

// The stage that runs graph node `node`.
int stage_of(const std::vector<int>& cuts, int node) {
  return static_cast<int>(std::upper_bound(cuts.begin(), cuts.end(), node) - cuts.begin());
}

// Which stages read each value (the last stage reads the graph's outputs).
std::vector<std::set<int>> readers_of(const Graph& g, const std::vector<int>& cuts) {
  std::vector<std::set<int>> readers(g.values.size());
  for (int n = 0; n < static_cast<int>(g.nodes.size()); ++n)
    for (int v : g.nodes[n].inputs)
      if (v >= 0) readers[v].insert(stage_of(cuts, n));
  for (int v : g.outputs) readers[v].insert(static_cast<int>(cuts.size()));
  return readers;
}

// Each stage's nodes, and what crosses its boundaries: a sent value travels from its maker to its
// last reader.
std::vector<StagePlan> plan_boundaries(const Graph& g, const std::vector<int>& cuts,
                                       const std::vector<std::set<int>>& readers) {
  const int num_nodes = static_cast<int>(g.nodes.size());
  const int num_stages = static_cast<int>(cuts.size()) + 1;
  std::vector<StagePlan> plans(num_stages);
  for (int s = 0; s < num_stages; ++s) {
    plans[s].stage_index = s;
    plans[s].node_begin = s == 0 ? 0 : cuts[s - 1];
    plans[s].node_end = s == num_stages - 1 ? num_nodes : cuts[s];
  }
  std::vector<std::set<int>> sent(num_stages);
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (!is_sent(g.values[v].kind) || readers[v].empty()) continue;
    int made = g.values[v].kind == ValueKind::Input ? 0 : stage_of(cuts, g.values[v].index);
    int last = *readers[v].rbegin();
    for (int s = made; s < last; ++s) sent[s].insert(static_cast<int>(v));
  }
  plans[0].inputs = g.inputs;
  for (int s = 0; s + 1 < num_stages; ++s) {
    plans[s].outputs.assign(sent[s].begin(), sent[s].end());
    plans[s + 1].inputs = plans[s].outputs;
  }
  plans[num_stages - 1].outputs = g.outputs;
  return plans;
}

// Places the model's state: its tensor in the first stage reading it, a copy in each later one
// (a parameter read by several stages is tied: `tied`). Adds the modules owning what a stage
// holds or runs to `module_paths`.
void place_state(const Graph& g, const std::vector<int>& cuts,
                 const std::vector<std::set<int>>& readers, nn::Module& root,
                 std::vector<StagePlan>& plans, std::vector<std::set<std::string>>& module_paths,
                 std::map<std::string, std::vector<int>>& tied) {
  std::unordered_map<std::string, Tensor> model_state;
  for (const auto& [name, t] : root.named_parameters()) model_state.emplace(name, t);
  for (const auto& [name, t] : root.named_buffers()) model_state.emplace(name, t);
  std::set<std::string> persistent;  // buffers in the state_dict
  for (const std::string& key : root.state_dict().keys()) persistent.insert(key);
  for (size_t v = 0; v < g.values.size(); ++v) {
    const Value& value = g.values[v];
    if (!is_state(value.kind) || readers[v].empty()) continue;
    auto it = model_state.find(value.name);
    if (it == model_state.end())
      throw std::invalid_argument("Pipe: the model no longer has '" + value.name + "'");
    bool first = true;
    for (int s : readers[v]) {
      plans[s].state.push_back(
          {static_cast<int>(v), first ? it->second : fresh_copy(it->second),
           value.kind == ValueKind::Parameter || persistent.count(value.name) > 0});
      first = false;
      add_with_ancestors(owner_of(value.name), module_paths[s]);
    }
    if (value.kind == ValueKind::Parameter && readers[v].size() > 1)
      tied[value.name].assign(readers[v].begin(), readers[v].end());
  }
  for (int n = 0; n < static_cast<int>(g.nodes.size()); ++n)
    add_with_ancestors(g.nodes[n].module_path, module_paths[stage_of(cuts, n)]);
}

}  // namespace

Pipe::Pipe(std::shared_ptr<const Graph> graph, std::vector<int> cuts, nn::Module& root)
    : graph_(std::move(graph)), cuts_(std::move(cuts)), id_(next_pipe_id()) {
  const Graph& g = *graph_;
  check_cuts(cuts_, static_cast<int>(g.nodes.size()));
  const std::vector<std::set<int>> readers = readers_of(g, cuts_);
  std::vector<StagePlan> plans = plan_boundaries(g, cuts_, readers);
  std::vector<std::set<std::string>> module_paths(plans.size());
  place_state(g, cuts_, readers, root, plans, module_paths, tied_);
  // Mirror the model's modules each stage touches, in the model's order.
  auto tree = module_tree(root);
  for (size_t s = 0; s < plans.size(); ++s) {
    for (const auto& [path, m] : tree)
      if (module_paths[s].count(path))
        plans[s].modules.push_back({path, m->type_name(), m->extra_repr()});
    stages_.push_back(std::make_shared<StageModule>(graph_, std::move(plans[s])));
  }
  std::vector<const StageModule*> modules;
  for (const auto& stage : stages_) modules.push_back(stage.get());
  digest_ = std::make_shared<const PipeDigest>(digest_of(*graph_, cuts_, modules));
}

const std::shared_ptr<StageModule>& Pipe::stage_module_ptr(int i) const {
  if (i < 0 || i >= num_stages())
    throw std::out_of_range("Pipe: stage " + std::to_string(i) + " does not exist (the pipe has " +
                            std::to_string(num_stages()) + " stages)");
  return stages_[i];
}

std::vector<TensorMeta> Pipe::boundary(int i) const {
  if (i < 0 || i + 1 >= num_stages())
    throw std::out_of_range("Pipe: no boundary after stage " + std::to_string(i) +
                            " in a pipe of " + std::to_string(num_stages()) + " stages");
  return stages_[i]->output_meta();
}

std::vector<std::string> Pipe::boundary_names(int i) const {
  boundary(i);  // range check
  return stages_[i]->output_names();
}

std::vector<Tensor> Pipe::flatten_inputs(const std::vector<Tensor>& args,
                                         const nn::TensorDict& kwargs) const {
  return stages_.front()->flatten_inputs(args, kwargs);
}

std::vector<Tensor> Pipe::forward(const std::vector<Tensor>& args,
                                  const nn::TensorDict& kwargs) const {
  std::vector<Tensor> values = flatten_inputs(args, kwargs);
  for (const auto& stage : stages_) {
    auto state = stage->named_parameters();
    if (state.empty()) state = stage->named_buffers();
    if (!state.empty()) {
      Device device = state.front().second.device();
      for (Tensor& t : values)
        if (t.defined() && t.device() != device) t = to_device(t, device);
    }
    values = stage->forward_outputs(values, {});
  }
  return values;
}

void Pipe::print(std::ostream& os, bool ops) const {
  os << "Pipe(num_stages=" << num_stages() << ")\n";
  for (int s = 0; s < num_stages(); ++s) {
    const StageModule& stage = *stages_[s];
    os << "stage " << s << ": ";
    stage.pretty_print(os);
    os << "\n";
    if (ops) {
      stage.print_ops(os);
      os << "\n";
    }
    if (s + 1 < num_stages()) {
      auto names = stage.output_names();
      auto metas = stage.output_meta();
      os << "  sends to stage " << s + 1 << ":";
      for (size_t i = 0; i < names.size(); ++i)
        os << " " << names[i] << " " << to_string(metas[i]) << (i + 1 < names.size() ? "," : "");
      os << "\n";
    }
  }
  for (const auto& [name, group] : tied_) {
    os << "tied: " << name << " in stages";
    for (int s : group) os << " " << s;
    os << "\n";
  }
}

std::ostream& operator<<(std::ostream& os, const Pipe& pipe) {
  pipe.print(os);
  return os;
}

}  // namespace tensorplay::pipelining
