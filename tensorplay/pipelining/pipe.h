// Pipe: a model split into stages. It holds each stage's module, the values crossing every
// boundary (skip connections passed through the stages between), and the tied parameters.
#pragma once

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "tensorplay/nn/module.h"
#include "tensorplay/pipelining/graph.h"
#include "tensorplay/pipelining/stage_module.h"

namespace tensorplay::pipelining {

struct PipeDigest;

/// The split representation that pipeline() returns and build_stage() consumes.
///
/// Stage s runs nodes [cut s-1, cut s) of the traced graph. Stage 0 receives the model's inputs
/// (positional, then keyword by name); stage s+1 receives exactly what stage s sends, so the
/// runtime only ever moves values from stage s to s+1 (and gradients back from s+1 to s). A
/// value made in stage i and read in stage j > i+1 (a skip connection, or a model input read
/// late) is sent through every stage between, which passes it on unchanged (an identity op,
/// so its gradient comes back the same way).
///
/// Parameters and buffers: a stage holds the model's own tensors (they move with the stage's
/// device). A parameter read by several stages (tied weights: a GPT's embedding and lm_head) is
/// held by the first of them as the model's tensor and by each later one as its own copy, a
/// separate leaf initialised from the same data. See sync_tied_gradients for training.
class Pipe {
 public:
  /// Splits `graph` at `cuts` (ascending, each in (0, number of nodes)); `root` is the traced
  /// module. Use pipeline(), which validates the cuts and explains bad ones.
  Pipe(std::shared_ptr<const Graph> graph, std::vector<int> cuts, nn::Module& root);

  // -- observers ---------------------------------------------------------------------------------

  int num_stages() const { return static_cast<int>(stages_.size()); }
  /// Stage i's module (PyTorch's get_stage_module).
  StageModule& stage_module(int i) const { return *stage_module_ptr(i); }
  const std::shared_ptr<StageModule>& stage_module_ptr(int i) const;
  /// Shape and dtype of every value stage i sends to stage i+1 (0 <= i < num_stages - 1).
  std::vector<TensorMeta> boundary(int i) const;
  /// Names of those values ("relu_3", "arg1").
  std::vector<std::string> boundary_names(int i) const;
  /// Cut positions in the graph (num_stages - 1 of them).
  const std::vector<int>& cuts() const { return cuts_; }
  const Graph& graph() const { return *graph_; }
  /// Identifies this split within the process (every pipeline() call makes a new one); stages
  /// built from it carry it, so a schedule can refuse stages of two different models.
  uint64_t id() const { return id_; }
  /// Tie groups: parameter name -> the stages holding a copy of it (two or more).
  const std::map<std::string, std::vector<int>>& tied_parameters() const { return tied_; }
  /// What this split is, line by line (graph, cuts, each stage's boundaries and parameters), to
  /// compare with the split other ranks built (see pipe_digest.h); shared by copies.
  const std::shared_ptr<const PipeDigest>& digest() const { return digest_; }

  // -- running locally
  // -----------------------------------------------------------------------------

  /// Runs every stage in order on one process (inputs moved to each stage's device) and returns
  /// the last stage's outputs: the model's outputs. Gradients flow back through all stages.
  std::vector<Tensor> forward(const std::vector<Tensor>& args,
                              const nn::TensorDict& kwargs = {}) const;
  std::vector<Tensor> operator()(const std::vector<Tensor>& args,
                                 const nn::TensorDict& kwargs = {}) const {
    return forward(args, kwargs);
  }
  /// Stage 0's positional inputs from the model's positional and keyword inputs (what a
  /// schedule feeds PipelineStage::forward on the first stage).
  std::vector<Tensor> flatten_inputs(const std::vector<Tensor>& args,
                                     const nn::TensorDict& kwargs) const;

  /// Stages with their modules, ops ranges and boundaries; with `ops`, every op too.
  void print(std::ostream& os, bool ops = false) const;

 private:
  std::shared_ptr<const Graph> graph_;
  std::vector<int> cuts_;
  uint64_t id_;
  std::vector<std::shared_ptr<StageModule>> stages_;
  std::map<std::string, std::vector<int>> tied_;
  std::shared_ptr<const PipeDigest> digest_;
};

std::ostream& operator<<(std::ostream& os, const Pipe& pipe);

}  // namespace tensorplay::pipelining
