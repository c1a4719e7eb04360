// Graph IR of a traced forward: the values (inputs, parameters, buffers, constants, op results)
// and the op nodes in execution order, each tagged with the module path it ran in.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "tensorplay/core/tensor.h"
#include "tensorplay/core/trace_hook.h"
#include "tensorplay/pipelining/tensor_meta.h"

namespace tensorplay::pipelining {

/// Where a value of the graph comes from.
enum class ValueKind { Input, Parameter, Buffer, Constant, Result };
const char* to_string(ValueKind kind);

/// One tensor of the graph.
struct Value {
  ValueKind kind = ValueKind::Result;
  /// Inputs: "arg0".. or the keyword; parameters and buffers: dotted name in the root module;
  /// constants: "const<N>"; results: "<op>_<node index>".
  std::string name;
  TensorMeta meta;
  /// Results: the node producing it; inputs: the position among the graph's inputs.
  int index = -1;
  /// Constants only: the value itself (tensors the forward made without a recorded op).
  Tensor constant;
};

/// One recorded op.
struct Node {
  std::string op;
  /// Value ids of the op's inputs; -1 stands for an undefined tensor (an absent bias).
  std::vector<int> inputs;
  int output = -1;
  /// Dotted path, in the root's module tree, of the module the op ran in ("" at the top).
  std::string module_path;
  /// Recomputes the op from new inputs (same attributes).
  trace::ReplayFn replay;
};

/// A traced forward. Node positions are cut positions too: cutting at position p puts nodes
/// [0, p) in one stage and [p, end) in the next.
struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;
  /// Value ids of the inputs: positional first, then keyword inputs sorted by name.
  std::vector<int> inputs;
  size_t num_positional_inputs = 0;
  /// Value ids of the forward's outputs.
  std::vector<int> outputs;
  /// Positions at which pipe_split() was called, ascending.
  std::vector<int> split_calls;
  /// Module paths, each with the positions of its first node and one past its last node
  /// (a module's range covers its submodules; the root "" covers every node).
  std::map<std::string, std::pair<int, int>> module_ranges;
  /// Every module path of the traced root, in named_modules() order (for error suggestions).
  std::vector<std::string> module_paths;

  /// Ids of the parameter (and buffer) values read by node `n`.
  std::vector<int> parameters_of(int n) const;
  /// For each cut position p in [0, nodes.size()], how many values (inputs and results, not
  /// parameters or constants) made before p are still needed at or after p.
  std::vector<int> crossing_counts() const;
  /// Total elements of the parameters, counted once each.
  int64_t parameter_numel() const;
};

/// How printing refers to value `v`: "%5" for results, the name otherwise, "None" for -1.
std::string value_ref(const Graph& graph, int v);

/// Prints one line per node: "%5 = linear(%0, layer0.weight, layer0.bias)  [8, 16]  @layer0".
std::ostream& operator<<(std::ostream& os, const Graph& graph);

}  // namespace tensorplay::pipelining
