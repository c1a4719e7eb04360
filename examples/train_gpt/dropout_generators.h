// Dropout generators named by module: each dropout module of the model draws from a generator of
// its own, so its masks and a checkpoint of them do not depend on the split into stages.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tensorplay/core/random.h"
#include "tensorplay/nn/module.h"
#include "tensorplay/pipelining/pipeline_stage.h"

namespace train_gpt {

/// Generators by name ("dropout." + the module's path in the model).
using DropoutGenerators =
    std::vector<std::pair<std::string, std::unique_ptr<tensorplay::Generator>>>;

/// Gives every dropout module of `model` a generator of its own, seeded `seed`, `seed` + 1, ... in
/// the order of named_modules().
DropoutGenerators make_dropout_generators(tensorplay::nn::Module& model, uint64_t seed);

/// The generators whose modules `stages` hold: the ones a process draws from, and the only ones
/// it may checkpoint. The others keep their first state in this process, and a checkpoint
/// holding that copy beside the drawing process's would restore it (the loader takes the lowest
/// stage's copy of a name).
std::vector<std::pair<std::string, tensorplay::Generator*>> hosted_dropout_generators(
    const DropoutGenerators& all,
    const std::vector<std::shared_ptr<tensorplay::pipelining::PipelineStage>>& stages);

/// Keeps the generators' states across a forward-only pass (validation): the pipeline's forward
/// applies dropout as it was traced, so without this a validation would move the masks training
/// draws next, and a run stopped after a step that validated would resume with other masks than
/// a run going straight on.
class KeepDropoutStates {
 public:
  explicit KeepDropoutStates(const DropoutGenerators& all);
  ~KeepDropoutStates();
  KeepDropoutStates(const KeepDropoutStates&) = delete;
  KeepDropoutStates& operator=(const KeepDropoutStates&) = delete;

 private:
  std::vector<std::pair<tensorplay::Generator*, std::mt19937_64>> kept_;
};

}  // namespace train_gpt
