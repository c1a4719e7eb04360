// StageModule: mirrored module tree and the node interpreter.
#include "tensorplay/pipelining/stage_module.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "tensorplay/core/autograd/checkpoint.h"
#include "tensorplay/core/ops/shape_ops.h"

namespace tensorplay::pipelining {

namespace {

/// An empty stand-in for a module of the model, printed like it.
class MirrorModule : public nn::Module {
 public:
  MirrorModule(std::string type, std::string extra)
      : type_(std::move(type)), extra_(std::move(extra)) {}
  std::string type_name() const override { return type_; }
  std::string extra_repr() const override { return extra_; }
  Tensor forward(const Tensor&) override {
    throw std::logic_error(type_ +
                           " inside a StageModule only holds parameters; run the stage "
                           "through StageModule::forward_outputs");
  }

 private:
  std::string type_, extra_;
};

std::string stage_name(int index) { return "stage " + std::to_string(index); }

// Runs node `n` of `g` on the values in `env`; an error names the stage, the op and its module.
Tensor run_node(const Graph& g, int n, const std::vector<Tensor>& env, int stage_index) {
  const Node& node = g.nodes[n];
  std::vector<Tensor> ins;
  ins.reserve(node.inputs.size());
  for (int v : node.inputs) ins.push_back(v < 0 ? Tensor() : env[v]);
  try {
    return node.replay(ins);
  } catch (const std::exception& e) {
    std::string where = stage_name(stage_index) + ", op %" + std::to_string(n) + " '" + node.op +
                        "'" + (node.module_path.empty() ? "" : " in '" + node.module_path + "'") +
                        ": ";
    throw std::invalid_argument(where + e.what());
  }
}

}  // namespace

StageModule::StageModule(std::shared_ptr<const Graph> graph, StagePlan plan)
    : graph_(std::move(graph)), plan_(std::move(plan)) {
  std::unordered_map<std::string, nn::Module*> by_path = {{"", this}};
  for (const auto& m : plan_.modules) {
    if (m.path.empty()) continue;
    size_t dot = m.path.rfind('.');
    std::string parent = dot == std::string::npos ? "" : m.path.substr(0, dot);
    std::string leaf = dot == std::string::npos ? m.path : m.path.substr(dot + 1);
    auto it = by_path.find(parent);
    if (it == by_path.end())
      throw std::logic_error("StageModule: module '" + m.path + "' listed before its parent");
    auto child = std::make_shared<MirrorModule>(m.type_name, m.extra_repr);
    it->second->register_module(leaf, child);
    by_path[m.path] = child.get();
  }
  for (const auto& [v, tensor, persistent] : plan_.state) {
    const Value& value = graph_->values.at(v);
    size_t dot = value.name.rfind('.');
    std::string owner = dot == std::string::npos ? "" : value.name.substr(0, dot);
    std::string leaf = dot == std::string::npos ? value.name : value.name.substr(dot + 1);
    auto it = by_path.find(owner);
    if (it == by_path.end())
      throw std::logic_error("StageModule: no mirrored module '" + owner + "' for '" + value.name +
                             "'");
    if (value.kind == ValueKind::Parameter)
      it->second->register_parameter(leaf, tensor, tensor.requires_grad());
    else
      it->second->register_buffer(leaf, tensor, persistent);
    state_names_.emplace_back(v, value.name);
  }
  for (int n = plan_.node_begin; n < plan_.node_end; ++n)
    for (int v : graph_->nodes[n].inputs)
      if (v >= 0 && graph_->values[v].kind == ValueKind::Constant)
        constants_.emplace(v, graph_->values[v].constant);
  for (int v : plan_.outputs)
    if (graph_->values[v].kind == ValueKind::Constant)
      constants_.emplace(v, graph_->values[v].constant);
  // Drop each intermediate from the interpreter as soon as its last reader has run (autograd
  // keeps what backward needs).
  std::unordered_map<int, int> last_reader;
  for (int n = plan_.node_begin; n < plan_.node_end; ++n)
    for (int v : graph_->nodes[n].inputs)
      if (v >= 0) last_reader[v] = n;
  std::set<int> kept(plan_.outputs.begin(), plan_.outputs.end());
  release_after_.resize(plan_.node_end - plan_.node_begin);
  for (const auto& [v, n] : last_reader) {
    ValueKind k = graph_->values[v].kind;
    if (!kept.count(v) && (k == ValueKind::Result || k == ValueKind::Input))
      release_after_[n - plan_.node_begin].push_back(v);
  }
}

std::vector<std::string> StageModule::input_names() const {
  std::vector<std::string> out;
  for (int v : plan_.inputs) out.push_back(graph_->values[v].name);
  return out;
}

std::vector<std::string> StageModule::output_names() const {
  std::vector<std::string> out;
  for (int v : plan_.outputs) out.push_back(graph_->values[v].name);
  return out;
}

std::vector<TensorMeta> StageModule::input_meta() const {
  std::vector<TensorMeta> out;
  for (int v : plan_.inputs) out.push_back(graph_->values[v].meta);
  return out;
}

std::vector<TensorMeta> StageModule::output_meta() const {
  std::vector<TensorMeta> out;
  for (int v : plan_.outputs) out.push_back(graph_->values[v].meta);
  return out;
}

std::vector<Tensor> StageModule::flatten_inputs(const std::vector<Tensor>& args,
                                                const nn::TensorDict& kwargs) const {
  if (kwargs.empty() && args.size() == plan_.inputs.size()) return args;
  const std::string who = stage_name(plan_.stage_index);
  if (plan_.stage_index != 0 || args.size() != graph_->num_positional_inputs) {
    std::string expected = std::to_string(plan_.inputs.size()) + " inputs";
    if (plan_.stage_index == 0 && plan_.inputs.size() != graph_->num_positional_inputs)
      expected += " (" + std::to_string(graph_->num_positional_inputs) +
                  " positional, then the keyword inputs)";
    throw std::invalid_argument(who + ": expected " + expected + ", got " +
                                std::to_string(args.size()) + " positional and " +
                                std::to_string(kwargs.size()) + " keyword inputs");
  }
  std::vector<Tensor> out = args;
  std::set<std::string> known;
  for (size_t i = graph_->num_positional_inputs; i < plan_.inputs.size(); ++i) {
    const std::string& name = graph_->values[plan_.inputs[i]].name;
    known.insert(name);
    auto it = kwargs.find(name);
    if (it == kwargs.end())
      throw std::invalid_argument(who + ": missing keyword input '" + name +
                                  "' (the model was traced with it)");
    out.push_back(it->second);
  }
  for (const auto& [name, t] : kwargs)
    if (!known.count(name))
      throw std::invalid_argument(who + ": unexpected keyword input '" + name +
                                  "' (the model was traced without it)");
  return out;
}

Tensor StageModule::constant_on(int value, Device device) {
  Tensor& c = constants_.at(value);
  if (c.device() != device) c = c.to(device);
  return c;
}

std::vector<Tensor> StageModule::forward_outputs(const std::vector<Tensor>& args,
                                                 const nn::TensorDict& kwargs) {
  std::vector<Tensor> inputs = flatten_inputs(args, kwargs);
  const Graph& g = *graph_;
  std::vector<Tensor> env(g.values.size());
  for (size_t i = 0; i < inputs.size(); ++i) env[plan_.inputs[i]] = inputs[i];
  for (const auto& [v, name] : state_names_) {
    env[v] = find_tensor(name);
    if (!env[v].defined())
      throw std::logic_error(stage_name(plan_.stage_index) + ": lost its tensor '" + name + "'");
  }
  Device device = !inputs.empty() && inputs[0].defined() ? inputs[0].device()
                  : !state_names_.empty()                ? env[state_names_[0].first].device()
                                                         : tensorplay::cpu();
  for (const auto& [v, c] : constants_) env[v] = constant_on(v, device);
  size_t next_segment = 0;
  for (int n = plan_.node_begin; n < plan_.node_end;) {
    if (next_segment < segments_.size() && segments_[next_segment]->begin == n) {
      const auto& segment = segments_[next_segment++];
      run_segment(segment, env);
      for (; n < segment->end; ++n)
        for (int v : release_after_[n - plan_.node_begin]) env[v] = Tensor();
      continue;
    }
    env[g.nodes[n].output] = run_node(g, n, env, plan_.stage_index);
    for (int v : release_after_[n - plan_.node_begin]) env[v] = Tensor();
    ++n;
  }
  std::vector<Tensor> outputs;
  for (int v : plan_.outputs) {
    Tensor t = g.values[v].kind == ValueKind::Constant ? constant_on(v, device) : env[v];
    // A value passed through unchanged gets an identity op, so its gradient flows back
    // through this stage like any other output's.
    if (std::find(plan_.inputs.begin(), plan_.inputs.end(), v) != plan_.inputs.end())
      t = reshape(t, t.shape());
    outputs.push_back(t);
  }
  return outputs;
}

void StageModule::run_segment(const std::shared_ptr<const Segment>& segment,
                              std::vector<Tensor>& env) const {
  std::vector<Tensor> inputs;
  for (int v : segment->inputs) inputs.push_back(env[v]);
  std::vector<std::pair<int, Tensor>> fixed;
  for (int v : segment->fixed) fixed.emplace_back(v, env[v]);
  // The closure holds what a recomputation in the backward needs, not the stage.
  auto fn = [graph = graph_, segment, fixed = std::move(fixed),
             stage = plan_.stage_index](const std::vector<Tensor>& in) {
    std::vector<Tensor> local(graph->values.size());
    for (const auto& [v, t] : fixed) local[v] = t;
    for (size_t i = 0; i < in.size(); ++i) local[segment->inputs[i]] = in[i];
    for (int n = segment->begin; n < segment->end; ++n) {
      local[graph->nodes[n].output] = run_node(*graph, n, local, stage);
      for (int v : segment->releases[n - segment->begin]) local[v] = Tensor();
    }
    std::vector<Tensor> out;
    for (int v : segment->outputs) out.push_back(local[v]);
    return out;
  };
  if (segment->outputs.empty()) {  // nothing reads its results: run them as they are
    fn(inputs);
    return;
  }
  std::vector<Tensor> out;
  try {
    out = autograd::checkpoint(std::move(fn), inputs);
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).rfind("checkpoint:", 0) != 0) throw;  // an op's error, named
    throw std::invalid_argument(stage_name(plan_.stage_index) + ", recomputed ops %" +
                                std::to_string(segment->begin) + "..%" +
                                std::to_string(segment->end - 1) + ": " + e.what());
  }
  for (size_t i = 0; i < out.size(); ++i) env[segment->outputs[i]] = out[i];
}

bool StageModule::runs_ops_of(const std::string& path) const {
  auto it = graph_->module_ranges.find(path);
  return it != graph_->module_ranges.end() &&
         std::max(it->second.first, plan_.node_begin) < std::min(it->second.second, plan_.node_end);
}

std::vector<std::pair<int, int>> StageModule::recomputed_ranges(
    const std::vector<std::string>& paths) const {
  const Graph& g = *graph_;
  std::vector<std::pair<int, int>> ranges;
  for (const std::string& path : paths) {
    if (!runs_ops_of(path)) {
      auto it = g.module_ranges.find(path);
      throw std::invalid_argument(
          stage_name(plan_.stage_index) + " runs no op of module '" + path + "' (" +
          (it == g.module_ranges.end()
               ? std::string("the traced model ran no op in a module of that name")
               : "its ops are %" + std::to_string(it->second.first) + "..%" +
                     std::to_string(it->second.second - 1) + ", this stage's %" +
                     std::to_string(plan_.node_begin) + "..%" +
                     std::to_string(plan_.node_end - 1)) +
          "): recompute modules of this stage only (PipelineStage::set_recompute picks them)");
    }
    const auto& [first, last] = g.module_ranges.at(path);
    ranges.emplace_back(std::max(first, plan_.node_begin), std::min(last, plan_.node_end));
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<int, int>> merged;  // overlapping ranges run as one
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first < merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  return merged;
}

std::shared_ptr<const StageModule::Segment> StageModule::make_segment(int begin, int end) const {
  const Graph& g = *graph_;
  auto s = std::make_shared<Segment>();
  s->begin = begin;
  s->end = end;
  std::vector<bool> read_later(g.values.size(), false);
  for (int n = s->end; n < plan_.node_end; ++n)
    for (int v : g.nodes[n].inputs)
      if (v >= 0) read_later[v] = true;
  for (int v : plan_.outputs) read_later[v] = true;
  for (int n = s->begin; n < s->end; ++n) {
    for (int v : g.nodes[n].inputs) {
      if (v < 0) continue;
      const Value& value = g.values[v];
      std::vector<int>* list = nullptr;
      if (value.kind == ValueKind::Input ||
          (value.kind == ValueKind::Result && value.index < s->begin))
        list = &s->inputs;  // made before the range (here or in an earlier stage)
      else if (value.kind != ValueKind::Result)
        list = &s->fixed;
      if (list && std::find(list->begin(), list->end(), v) == list->end()) list->push_back(v);
    }
    const int made = g.nodes[n].output;
    if (read_later[made] &&
        std::find(s->outputs.begin(), s->outputs.end(), made) == s->outputs.end())
      s->outputs.push_back(made);
    s->releases.push_back(release_after_[n - plan_.node_begin]);
  }
  return s;
}

void StageModule::set_recomputed_modules(const std::vector<std::string>& paths) {
  std::vector<std::shared_ptr<const Segment>> segments;
  for (const auto& [begin, end] : recomputed_ranges(paths))
    segments.push_back(make_segment(begin, end));
  segments_ = std::move(segments);
  recomputed_ = paths;
}

Tensor StageModule::forward_args(const std::vector<Tensor>& args, const nn::TensorDict& kwargs) {
  std::vector<Tensor> out = forward_outputs(args, kwargs);
  if (out.size() != 1)
    throw std::invalid_argument(stage_name(plan_.stage_index) + " sends " +
                                std::to_string(out.size()) +
                                " values on: call forward_outputs to get them all");
  return out[0];
}

std::string StageModule::extra_repr() const {
  return "stage=" + std::to_string(plan_.stage_index) + ", ops=[" +
         std::to_string(plan_.node_begin) + ", " + std::to_string(plan_.node_end) +
         "), inputs=" + std::to_string(plan_.inputs.size()) +
         ", outputs=" + std::to_string(plan_.outputs.size());
}

void StageModule::print_ops(std::ostream& os) const {
  const Graph& g = *graph_;
  auto ref = [&](int v) { return value_ref(g, v); };
  os << stage_name(plan_.stage_index) << "(";
  for (size_t i = 0; i < plan_.inputs.size(); ++i)
    os << (i ? ", " : "") << ref(plan_.inputs[i]) << ": "
       << to_string(g.values[plan_.inputs[i]].meta);
  os << ") {\n";
  for (int n = plan_.node_begin; n < plan_.node_end; ++n) {
    const Node& node = g.nodes[n];
    os << "  %" << n << " = " << node.op << "(";
    for (size_t k = 0; k < node.inputs.size(); ++k) os << (k ? ", " : "") << ref(node.inputs[k]);
    os << ")  " << to_string(g.values[node.output].meta);
    if (!node.module_path.empty()) os << "  @" << node.module_path;
    os << "\n";
  }
  os << "  send ";
  for (size_t i = 0; i < plan_.outputs.size(); ++i) os << (i ? ", " : "") << ref(plan_.outputs[i]);
  os << "\n}";
}

}  // namespace tensorplay::pipelining
