// StageModule: one stage of a split model, a small graph interpreter that replays its slice of
// the traced ops. Its parameters and buffers keep the model's dotted names.
#pragma once

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tensorplay/nn/module.h"
#include "tensorplay/pipelining/graph.h"

namespace tensorplay::pipelining {

/// What one stage computes, as the splitter decided it.
struct StagePlan {
  int stage_index = 0;
  /// Nodes [node_begin, node_end) of the graph.
  int node_begin = 0, node_end = 0;
  /// Value ids received (stage 0: the graph's inputs) and sent on (last stage: the graph's
  /// outputs), in order.
  std::vector<int> inputs, outputs;
  /// A parameter or buffer the nodes read, with the tensor this stage holds.
  struct State {
    int value = -1;
    Tensor tensor;
    /// Buffers only: part of state_dict (false for derived data such as position ids).
    bool persistent = true;
  };
  std::vector<State> state;
  /// Module paths to mirror (the owners of `state` and the modules the nodes ran in, with their
  /// ancestors), in the model's order, each with the original's type name and extra_repr.
  struct MirroredModule {
    std::string path, type_name, extra_repr;
  };
  std::vector<MirroredModule> modules;
};

/// A stage's module. Its children mirror the model's tree for the parts this stage holds
/// (`layer1` -> `net` -> `0` with parameter `weight`), so named_parameters() and state keys are
/// a subset of the model's. forward_outputs runs the stage's nodes through their replay
/// closures and returns every value sent to the next stage.
class StageModule : public nn::Module {
 public:
  StageModule(std::shared_ptr<const Graph> graph, StagePlan plan);

  // -- forward -----------------------------------------------------------------------------------

  /// Inputs in order (stage_input_names()); stage 0 also takes the model's keyword inputs by
  /// name after its positional ones, as the model does.
  std::vector<Tensor> forward_outputs(const std::vector<Tensor>& args,
                                      const nn::TensorDict& kwargs) override;
  /// The single output (an error when the stage sends several values).
  Tensor forward_args(const std::vector<Tensor>& args, const nn::TensorDict& kwargs) override;
  Tensor forward(const Tensor& x) override { return forward_args({x}, {}); }

  // -- observers ---------------------------------------------------------------------------------

  int stage_index() const { return plan_.stage_index; }
  const StagePlan& plan() const { return plan_; }
  const Graph& graph() const { return *graph_; }
  /// Names of the values received and sent ("arg0", "relu_3", ...).
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  std::vector<TensorMeta> input_meta() const;
  std::vector<TensorMeta> output_meta() const;
  /// Positional inputs of stage 0 from the model's positional and keyword inputs.
  std::vector<Tensor> flatten_inputs(const std::vector<Tensor>& args,
                                     const nn::TensorDict& kwargs) const;

  // -- recomputation -----------------------------------------------------------------------------

  /// Runs the ops of each of these modules (dotted paths in the model) under autograd::checkpoint
  /// in forward_outputs: one checkpoint per contiguous run of their ops in this stage (modules
  /// whose ops overlap or touch share one), whose inputs are the values its ops read from before
  /// it and whose outputs are the values read after it or sent on. Replaces the previous choice;
  /// empty: none. Throws std::invalid_argument naming a module that runs no op in this stage.
  void set_recomputed_modules(const std::vector<std::string>& paths);
  const std::vector<std::string>& recomputed_modules() const { return recomputed_; }
  /// Whether module `path` runs at least one op in this stage.
  bool runs_ops_of(const std::string& path) const;

  std::string type_name() const override { return "StageModule"; }
  std::string extra_repr() const override;
  /// The stage's ops, one per line, as the Graph prints them.
  void print_ops(std::ostream& os) const;

 private:
  Tensor constant_on(int value, Device device);

  std::shared_ptr<const Graph> graph_;
  StagePlan plan_;
  /// Dotted names of the state values, resolved at each forward (the module may have moved).
  std::vector<std::pair<int, std::string>> state_names_;
  /// Constants this stage reads, cached on the device they were last needed on.
  std::map<int, Tensor> constants_;
  /// Per node of the stage: values no later node of the stage reads.
  std::vector<std::vector<int>> release_after_;
  /// Recomputed node ranges of the stage, ascending, with what crosses their borders.
  struct Segment {
    int begin = 0, end = 0;
    std::vector<int> inputs;   // values read in the range and made before it
    std::vector<int> fixed;    // parameters, buffers and constants read in the range
    std::vector<int> outputs;  // values made in the range and read after it or sent on
    std::vector<std::vector<int>> releases;  // per node of the range: as release_after_
  };
  std::vector<std::shared_ptr<const Segment>> segments_;
  std::vector<std::string> recomputed_;
  /// Runs a segment's nodes under a checkpoint, reading and writing `env`.
  void run_segment(const std::shared_ptr<const Segment>& segment, std::vector<Tensor>& env) const;
  /// The node ranges of modules `paths` within this stage, ascending, overlaps merged; throws
  /// std::invalid_argument naming a module this stage runs no op of.
  std::vector<std::pair<int, int>> recomputed_ranges(const std::vector<std::string>& paths) const;
  /// The segment of nodes [begin, end): what it reads from before it, its fixed values, what it
  /// makes that is read after it, and what each node releases.
  std::shared_ptr<const Segment> make_segment(int begin, int end) const;
};

}  // namespace tensorplay::pipelining
