// Dropout generators named by module, those of a process's stages, and their states kept across a
// validation.
#include "dropout_generators.h"

#include <set>

#include "tensorplay/nn/dropout.h"

namespace train_gpt {

namespace tp = tensorplay;

DropoutGenerators make_dropout_generators(tp::nn::Module& model, uint64_t seed) {
  DropoutGenerators all;
  for (auto& [path, module] : model.named_modules())
    if (auto* drop = dynamic_cast<tp::nn::DropoutImpl*>(module.get())) {
      all.emplace_back("dropout." + path, std::make_unique<tp::Generator>(seed + all.size()));
      drop->set_generator(all.back().second.get());
    }
  return all;
}

std::vector<std::pair<std::string, tp::Generator*>> hosted_dropout_generators(
    const DropoutGenerators& all,
    const std::vector<std::shared_ptr<tp::pipelining::PipelineStage>>& stages) {
  // A stage's module mirrors the model's modules it runs, under their paths in the model.
  std::set<std::string> held;
  for (const auto& stage : stages)
    for (const auto& [path, module] : stage->module().named_modules())
      held.insert("dropout." + path);
  std::vector<std::pair<std::string, tp::Generator*>> hosted;
  for (const auto& [name, generator] : all)
    if (held.count(name)) hosted.emplace_back(name, generator.get());
  return hosted;
}

KeepDropoutStates::KeepDropoutStates(const DropoutGenerators& all) {
  for (const auto& [name, generator] : all) {
    auto lock = generator->lock();
    kept_.emplace_back(generator.get(), generator->engine());
  }
}

KeepDropoutStates::~KeepDropoutStates() {
  for (auto& [generator, engine] : kept_) {
    auto lock = generator->lock();
    generator->engine() = engine;
  }
}

}  // namespace train_gpt
