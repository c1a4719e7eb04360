// train_gpt --tp N with a pipeline: stages cut by hand and split by tensor parallelism.
#include "tensor_parallel_stages.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "model_choice.h"
#include "tensorplay/distributed/init_device_mesh.h"
#include "tensorplay/distributed/tensor_parallel/model_plans.h"
#include "tensorplay/distributed/tensor_parallel/parallelize_stage.h"
#include "tensorplay/nn/dropout.h"
#include "tensorplay/nn/model_stage.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace pp = tensorplay::pipelining;
namespace dist = tensorplay::distributed;
namespace tpar = tensorplay::distributed::tensor_parallel;

namespace train_gpt {
namespace {

// The model cut to blocks [first, end), its plan, and the width of what crosses its edges.
struct Cut {
  std::shared_ptr<tp::nn::Module> stage;
  tpar::ParallelizePlan plan;
  int64_t width = 0;
  bool tied = false;
  std::string tie_name;
};

Cut cut_model(const std::shared_ptr<tp::nn::Module>& model, int64_t first, int64_t end, int tp) {
  if (auto gpt = std::dynamic_pointer_cast<tp::nn::GPTImpl>(model))
    return {tp::nn::ModelStage(tp::nn::GPT(gpt), first, end).ptr(),
            tpar::gpt_tp_plan(gpt->config(), tp), gpt->config().width, gpt->config().tie_weights,
            "wte.weight"};
  if (auto llama = std::dynamic_pointer_cast<tp::nn::LlamaImpl>(model))
    return {tp::nn::ModelStage(tp::nn::Llama(llama), first, end).ptr(),
            tpar::llama_tp_plan(llama->config(), tp), llama->config().width,
            llama->config().tie_weights, "embed_tokens.weight"};
  throw std::invalid_argument("--tp splits a GPT or a Llama, not a " + model->type_name());
}

// The stage's dropout modules draw from the run's generators of their paths.
void use_generators(tp::nn::Module& stage, const DropoutGenerators& generators) {
  std::map<std::string, tp::Generator*> by_name;
  for (const auto& [name, generator] : generators) by_name[name] = generator.get();
  for (auto& [path, module] : stage.named_modules())
    if (auto* drop = dynamic_cast<tp::nn::DropoutImpl*>(module.get()))
      if (auto it = by_name.find("dropout." + path); it != by_name.end())
        drop->set_generator(it->second);
}

void check_flags(const Options& o) {
  auto refuse = [&](const std::string& flag) {
    throw std::invalid_argument("--tp " + std::to_string(o.tp) + " with a pipeline does not take " +
                                flag + " yet; leave it out (or run --unsplit --tp)");
  };
  if (!o.plan.empty()) refuse("--plan");
  if (!o.init_from.empty()) refuse("--init-from");
  if (o.dtype != "float32") refuse("--dtype " + o.dtype);
  if (o.device != "cpu") refuse("--device " + o.device);
}

}  // namespace

TensorParallelStages build_tensor_parallel_stages(const Options& o, int64_t vocab,
                                                  tp::schedules::ScheduleKind kind, int ranks,
                                                  int stages_per_rank,
                                                  const DropoutGenerators& generators) {
  check_flags(o);
  const int world = dist::get_world_size();
  if (world != ranks * o.dp * o.tp)
    throw std::invalid_argument(
        "tp-launch started " + std::to_string(world) + " processes, but " + std::to_string(ranks) +
        " pipeline ranks x --dp " + std::to_string(o.dp) + " x --tp " + std::to_string(o.tp) +
        " need " + std::to_string(ranks * o.dp * o.tp) + ": start that many");
  TensorParallelStages built;
  built.mesh = dist::init_device_mesh("cpu", {ranks, o.dp, o.tp}, {"pp", "dp", "tp"});
  const int64_t rows = o.batch / o.dp / o.n_microbatches;
  for (int s :
       pp::stages_of_rank(kind, built.mesh.get_local_rank("pp"), o.stages, stages_per_rank)) {
    tp::manual_seed(o.seed);  // every stage cut from a copy of the same model
    const ModelChoice choice = make_model(o, vocab);
    const int64_t layers = choice.layers;
    Cut cut = cut_model(choice.module, s * layers / o.stages, (s + 1) * layers / o.stages, o.tp);
    std::map<std::string, int64_t> whole;
    for (const auto& [name, p] : cut.stage->named_parameters()) whole[name] = p.numel();
    tpar::parallelize_stage(*cut.stage, built.mesh, cut.plan);
    std::set<std::string> split;
    for (const auto& [name, p] : cut.stage->named_parameters())
      if (p.numel() < whole.at(name)) split.insert(name);
    use_generators(*cut.stage, generators);
    const bool last = s == o.stages - 1;
    const pp::TensorMeta in{s == 0 ? tp::Shape{rows, o.context}
                                   : tp::Shape{rows, o.context, cut.width}};
    const pp::TensorMeta out{last ? tp::Shape{rows, o.context, vocab}
                                  : tp::Shape{rows, o.context, cut.width}};
    auto stage = std::make_shared<pp::PipelineStage>(cut.stage, s, o.stages, tp::cpu(),
                                                     std::vector{in}, std::vector{out});
    stage->set_mesh(built.mesh);
    if (cut.tied && o.stages > 1 && (s == 0 || last))
      stage->set_tied_parameters({{cut.tie_name, {0, o.stages - 1}}});
    built.stages.push_back(stage);
    built.split.push_back(std::move(split));
  }
  return built;
}

float clip_tensor_parallel_gradients(const TensorParallelStages& built, float max_norm,
                                     const dist::ProcessGroup& pipeline,
                                     const dist::ProcessGroup& tp) {
  std::vector<tp::Tensor> grads;
  double split = 0, whole = 0;
  for (size_t i = 0; i < built.stages.size(); ++i) {
    const auto& stage = built.stages[i];
    for (const auto& [name, p] : stage->module().named_parameters()) {
      if (!p.grad().defined()) continue;
      grads.push_back(p.grad());
      auto tied = stage->tied_parameters().find(name);
      if (tied != stage->tied_parameters().end() &&
          *std::min_element(tied->second.begin(), tied->second.end()) != stage->stage_index())
        continue;
      double squares = 0;
      for (float v : p.grad().to_vector()) squares += static_cast<double>(v) * v;
      (built.split[i].count(name) ? split : whole) += squares;
    }
  }
  tp::Tensor sums = tp::from_vector({static_cast<float>(split)}, {1});
  tp.all_reduce(sums);
  tp::Tensor total = tp::scalar_tensor(sums.item() + static_cast<float>(whole));
  pipeline.all_reduce(total);
  const float norm = std::sqrt(total.item());
  const float scale = max_norm / (norm + 1e-6f);
  if (max_norm > 0 && scale < 1.0f)
    for (tp::Tensor& g : grads) g.copy_(g * scale);
  return norm;
}

}  // namespace train_gpt
