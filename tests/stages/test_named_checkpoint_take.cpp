// Tests for named_checkpoint.h's loading without copies: the tensors read from the files become
// the stages' and the optimizer's storage, while every tensor keeps its identity, no two tensors
// that were apart end up sharing memory (tied copies in two stages, moments, parameters), and
// training goes on bit for bit.

#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "models.h"
#include "tensorplay/pipelining/checkpoints/named_checkpoint.h"
#include "tensors/temp_path.h"

using namespace stages_test;
namespace fs = std::filesystem;

namespace {

using Stages = std::vector<std::shared_ptr<pp::PipelineStage>>;

// A GPT with a tied embedding and head, split before blocks.1: the tie spans two stages.
Stages tied_gpt(uint64_t seed) {
  tp::manual_seed(seed);
  auto model = tp::nn::GPT(tp::nn::GPTConfig{
      .vocab_size = 16, .context_length = 8, .n_layer = 2, .n_head = 2, .width = 8});
  pp::PipelineOptions options;
  options.split_spec["blocks.1"] = pp::SplitPoint::Beginning;
  return pp::build_stages(pp::pipeline(model, {tp::zeros({2, 8})}, options), {tp::cpu()});
}

// Two AdamW steps from random gradients drawn by parameter name: the copies of a tied weight in
// two stages get the same ones and stay equal, as a tied-gradient hook keeps them.
void train(const Stages& stages, tp::optim::AdamW& opt, uint64_t seed) {
  for (int s = 0; s < 2; ++s) {
    for (const auto& stage : stages)
      for (auto [name, p] : stage->module().named_parameters()) {
        tp::Generator g(seed * 1000 + s * 100 + std::hash<std::string>()(name) % 97);
        p.set_grad(tp::randn(p.shape(), {}, &g));
      }
    opt.step();
    opt.zero_grad();
  }
}

// Every stage tensor's and optimizer state tensor's bits, by "<stage>:<name>" and "opt:<key>".
std::map<std::string, std::vector<uint32_t>> bits(const Stages& stages,
                                                  const tp::optim::AdamW& opt) {
  std::map<std::string, std::vector<uint32_t>> out;
  auto add = [&out](const std::string& key, const tp::Tensor& t) {
    auto& b = out[key];
    b.resize(t.nbytes() / 4);
    if (t.nbytes() > 0) std::memcpy(b.data(), t.raw_data(), t.nbytes());  // empty: b.data() null
  };
  for (const auto& stage : stages)
    for (const auto& [name, t] : stage->module().state_dict())
      add(std::to_string(stage->stage_index()) + ":" + name, t);
  for (const auto& [key, t] : opt.state_dict()) add("opt:" + key, t);
  return out;
}

// Distinct TensorImpls that share a storage (a tensor held twice, as a tied module holds it,
// counts once): none may.
int shared_storages(const Stages& stages, const tp::optim::AdamW& opt) {
  std::map<const tp::Storage*, std::set<const tp::TensorImpl*>> by_storage;
  for (const auto& stage : stages)
    for (const auto& [name, t] : stage->module().state_dict())
      by_storage[t.impl().storage.get()].insert(t.impl_ptr().get());
  for (const auto& [key, t] : opt.state_dict())
    if (t.numel() > 1) by_storage[t.impl().storage.get()].insert(t.impl_ptr().get());
  int shared = 0;
  for (const auto& [storage, impls] : by_storage) shared += impls.size() > 1;
  return shared;
}

}  // namespace

TEST_CASE("a load takes the tensors it read as storage, nothing aliased, bits kept",
          "[checkpoint][named][take]") {
  const test_files::TempDir temp;
  const std::string& dir = temp.path;
  const Stages saved = tied_gpt(1);
  REQUIRE(!saved.back()->tied_parameters().empty());
  tp::optim::AdamW saved_opt(pp::parameters(saved));
  train(saved, saved_opt, 3);
  pp::save_named_checkpoint(dir, saved, saved_opt, 2);

  const Stages fresh = tied_gpt(2);
  tp::optim::AdamW fresh_opt(pp::parameters(fresh));
  REQUIRE(shared_storages(fresh, fresh_opt) == 0);
  std::map<const tp::TensorImpl*, const void*> data_before;
  for (const tp::Tensor& p : fresh_opt.parameters()) data_before[p.impl_ptr().get()] = p.raw_data();
  pp::load_named_checkpoint(dir, fresh, fresh_opt);

  CHECK(bits(fresh, fresh_opt) == bits(saved, saved_opt));
  CHECK(shared_storages(fresh, fresh_opt) == 0);
  int taken = 0;
  for (const tp::Tensor& p : fresh_opt.parameters()) {
    REQUIRE(data_before.count(p.impl_ptr().get()) == 1);  // the optimizer's tensors are the same
    taken += p.raw_data() != data_before.at(p.impl_ptr().get());
  }
  // Each tensor read took its storage; a tied weight is read once, so its second copy (another
  // stage's own tensor) is a copy.
  const size_t tied = saved.back()->tied_parameters().size();
  CHECK(taken == static_cast<int>(fresh_opt.parameters().size() - tied));
  // The stages still hold the optimizer's tensors: training moves both alike.
  train(saved, saved_opt, 4);
  train(fresh, fresh_opt, 4);
  CHECK(bits(fresh, fresh_opt) == bits(saved, saved_opt));
}
