// The tracer: an OpRecorder that turns the ops of one forward into a Graph.
#include "tensorplay/pipelining/tracer.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <unordered_map>

namespace tensorplay::pipelining {

std::vector<std::pair<std::string, nn::Module*>> module_tree(nn::Module& root) {
  std::vector<std::pair<std::string, nn::Module*>> out;
  std::function<void(const std::string&, nn::Module&)> walk = [&](const std::string& path,
                                                                  nn::Module& m) {
    out.emplace_back(path, &m);
    for (const auto& [name, child] : m.named_children())
      walk(path.empty() ? name : path + "." + name, *child);
  };
  walk("", root);
  return out;
}

namespace {

Tensor copy_of(const Tensor& t) {
  Tensor out = empty(t.shape(), {.dtype = t.dtype(), .device = t.device()});
  out.copy_(t);
  return out;
}

class GraphRecorder : public trace::OpRecorder {
 public:
  explicit GraphRecorder(nn::Module& root) {
    for (const auto& [path, m] : module_tree(root)) {
      module_paths_.emplace(static_cast<const void*>(m), path);  // first path wins
      graph_.module_paths.push_back(path);
    }
    for (const auto& [name, t] : root.named_parameters()) add_leaf(t, ValueKind::Parameter, name);
    for (const auto& [name, t] : root.named_buffers()) add_leaf(t, ValueKind::Buffer, name);
  }

  void add_input(const Tensor& t, const std::string& name) {
    if (!t.defined()) throw std::invalid_argument("trace: input '" + name + "' is undefined");
    auto known = ids_.find(t.impl_ptr().get());
    if (known != ids_.end())
      throw std::invalid_argument(
          "trace: input '" + name + "' is the same tensor as " +
          to_string(graph_.values[known->second].kind) + " '" + graph_.values[known->second].name +
          "'; the tracer tells tensors apart by identity, so pass a distinct tensor (a clone)");
    int id = add_value(
        {ValueKind::Input, name, meta_of(t), static_cast<int>(graph_.inputs.size()), Tensor()});
    graph_.inputs.push_back(id);
    ids_.emplace(t.impl_ptr().get(), id);
    keep_alive_.push_back(t);
  }

  void record_op(const char* op, const std::vector<Tensor>& inputs, const Tensor& output,
                 trace::ReplayFn replay) override {
    Node node;
    node.op = op;
    node.module_path = path_stack_.empty() ? "" : path_stack_.back();
    for (const Tensor& t : inputs) node.inputs.push_back(value_of(t, node));
    int index = static_cast<int>(graph_.nodes.size());
    node.output = add_value({ValueKind::Result, node.op + "_" + std::to_string(index),
                             meta_of(output), index, Tensor()});
    node.replay = std::move(replay);
    ids_[output.impl_ptr().get()] = node.output;  // an op returning its input re-maps it
    keep_alive_.insert(keep_alive_.end(), inputs.begin(), inputs.end());
    keep_alive_.push_back(output);
    graph_.nodes.push_back(std::move(node));
  }

  void record_split() override {
    graph_.split_calls.push_back(static_cast<int>(graph_.nodes.size()));
  }

  void enter_module(const std::string& call_path) override {
    auto it = module_paths_.find(trace::current_module());
    if (it != module_paths_.end()) {
      path_stack_.push_back(it->second);
      return;
    }
    // A module outside the root's tree (made inside forward): name it under its caller.
    std::string parent = path_stack_.empty() ? "" : path_stack_.back();
    std::string name = call_path.substr(call_path.rfind('.') + 1);
    path_stack_.push_back(parent.empty() ? name : parent + "." + name);
  }

  void exit_module(const std::string&) override {
    if (!path_stack_.empty()) path_stack_.pop_back();
  }

  int output_value(const Tensor& t, size_t i) {
    if (!t.defined())
      throw std::invalid_argument("trace: output " + std::to_string(i) + " is undefined");
    Node none;
    none.op = "the forward's return";
    return value_of(t, none);
  }

  Graph take() { return std::move(graph_); }
  Graph& graph() { return graph_; }

 private:
  static TensorMeta meta_of(const Tensor& t) { return {t.shape(), t.dtype()}; }

  int add_value(Value v) {
    graph_.values.push_back(std::move(v));
    return static_cast<int>(graph_.values.size()) - 1;
  }

  void add_leaf(const Tensor& t, ValueKind kind, const std::string& name) {
    if (!t.defined() || ids_.count(t.impl_ptr().get())) return;
    ids_.emplace(t.impl_ptr().get(), add_value({kind, name, meta_of(t), -1, Tensor()}));
  }

  int value_of(const Tensor& t, const Node& consumer) {
    if (!t.defined()) return -1;
    auto it = ids_.find(t.impl_ptr().get());
    if (it != ids_.end()) return it->second;
    if (t.grad_fn())
      throw std::invalid_argument(
          "trace: an input of '" + consumer.op + "'" +
          (consumer.module_path.empty() ? "" : " in module '" + consumer.module_path + "'") +
          " has autograd history but was made by an op that did not report itself through "
          "trace::record; that op cannot be replayed in a pipeline stage (make it call "
          "trace::record, or compute it from recorded ops)");
    int id = add_value({ValueKind::Constant, "const" + std::to_string(num_constants_++), meta_of(t),
                        -1, copy_of(t.detach())});
    ids_.emplace(t.impl_ptr().get(), id);
    keep_alive_.push_back(t);  // its address must not be reused while tracing
    return id;
  }

  Graph graph_;
  std::unordered_map<const TensorImpl*, int> ids_;
  std::unordered_map<const void*, std::string> module_paths_;
  std::vector<std::string> path_stack_;
  std::vector<Tensor> keep_alive_;
  int num_constants_ = 0;
};

/// Restores the previous recorder even when the forward throws.
class RecorderScope {
 public:
  explicit RecorderScope(trace::OpRecorder* r) : previous_(trace::set_active_recorder(r)) {}
  ~RecorderScope() { trace::set_active_recorder(previous_); }
  RecorderScope(const RecorderScope&) = delete;
  RecorderScope& operator=(const RecorderScope&) = delete;

 private:
  trace::OpRecorder* previous_;
};

/// Drops nodes whose results reach no output (the inner ops of a composite op, unused
/// branches) and re-maps every position.
void eliminate_dead_nodes(Graph& g) {
  const int n = static_cast<int>(g.nodes.size());
  std::vector<char> live_value(g.values.size(), 0), live_node(n, 0);
  for (int v : g.outputs) live_value[v] = 1;
  for (int i = n - 1; i >= 0; --i) {
    if (!live_value[g.nodes[i].output]) continue;
    live_node[i] = 1;
    for (int v : g.nodes[i].inputs)
      if (v >= 0) live_value[v] = 1;
  }
  // new_position[p]: live nodes before raw position p.
  std::vector<int> new_position(n + 1, 0);
  for (int i = 0; i < n; ++i) new_position[i + 1] = new_position[i] + live_node[i];
  std::vector<Node> kept;
  for (int i = 0; i < n; ++i) {
    if (!live_node[i]) continue;
    g.values[g.nodes[i].output].index = static_cast<int>(kept.size());
    kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  for (int& p : g.split_calls) p = new_position[p];
  // Values nothing live uses stay (ids are stable) but are never referenced again.
}

void compute_module_ranges(Graph& g) {
  const int n = static_cast<int>(g.nodes.size());
  for (int i = 0; i < n; ++i) {
    // The node belongs to its module and every module above it: "", "a", "a.b", "a.b.c".
    const std::string& path = g.nodes[i].module_path;
    std::vector<std::string> prefixes = {""};
    for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', dot + 1))
      prefixes.push_back(path.substr(0, dot));
    if (!path.empty()) prefixes.push_back(path);
    for (const std::string& prefix : prefixes) {
      auto [it, fresh] = g.module_ranges.try_emplace(prefix, i, i + 1);
      if (!fresh) it->second.second = i + 1;
    }
  }
}

}  // namespace

Graph trace(nn::Module& module, const std::vector<Tensor>& args, const nn::TensorDict& kwargs) {
  GraphRecorder recorder(module);
  for (size_t i = 0; i < args.size(); ++i) recorder.add_input(args[i], "arg" + std::to_string(i));
  for (const auto& [name, t] : kwargs) recorder.add_input(t, name);
  recorder.graph().num_positional_inputs = args.size();
  std::vector<Tensor> outputs;
  {
    RecorderScope scope(&recorder);
    outputs = module.forward_outputs(args, kwargs);
  }
  std::vector<int> output_ids;
  for (size_t i = 0; i < outputs.size(); ++i)
    output_ids.push_back(recorder.output_value(outputs[i], i));
  Graph g = recorder.take();
  g.outputs = std::move(output_ids);
  eliminate_dead_nodes(g);
  std::sort(g.split_calls.begin(), g.split_calls.end());
  compute_module_ranges(g);
  return g;
}

}  // namespace tensorplay::pipelining
