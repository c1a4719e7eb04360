// The pipeline side of the checks against transformers: one training step's gradients of a
// Hugging Face folder's model split into 3 stages at its blocks and run by the 1F1B schedule on
// the stage actors, written under transformers' names.
//
//   llama_pipeline_peer FOLDER TOKENS OUT
// TOKENS holds "tokens" and "targets", float32 [B, T] (B a multiple of 3: three microbatches); OUT
// receives "loss" (the mean cross entropy over the microbatches) and each parameter's gradient.
#include <iostream>

#include "tensorplay/nn/hf/hugging_face_llama.h"
#include "tensorplay/pipelining/build_stage.h"
#include "tensorplay/pipelining/pipeline.h"
#include "tensorplay/pipelining/runtime/schedule.h"
#include "tensorplay/tensor.h"

namespace tp = tensorplay;
namespace nn = tensorplay::nn;
namespace pp = tensorplay::pipelining;
namespace sc = tensorplay::schedules;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: llama_pipeline_peer FOLDER TOKENS OUT\n";
    return 2;
  }
  try {
    nn::Llama model = nn::llama_from_pretrained(argv[1]);
    model->train();
    const nn::LlamaConfig config = model->config();
    if (config.n_layer < 3) throw std::invalid_argument("3 stages need 3 layers or more");
    const tp::StateDict in = tp::load_safetensors(argv[2]);
    const tp::Tensor idx = in.at("tokens"), targets = in.at("targets");
    const int n_microbatches = 3;
    pp::PipelineOptions options;
    options.split_spec["layers.1"] = pp::SplitPoint::Beginning;
    options.split_spec["layers." + std::to_string(config.n_layer - 1)] = pp::SplitPoint::Beginning;
    auto pipe = pp::pipeline(model, {idx.slice0(0, idx.size(0) / n_microbatches)}, options);
    auto stages = pp::build_stages(pipe, {tp::cpu()});
    const int64_t vocab = config.vocab_size;
    auto loss_fn = [vocab](const tp::Tensor& logits, const tp::Tensor& t) {
      return tp::cross_entropy(logits.reshape({-1, vocab}), t.reshape({-1}));
    };
    pp::PipelineSchedule schedule(stages, n_microbatches, loss_fn, sc::ScheduleKind::OneFOneB);
    std::vector<tp::Tensor> losses;
    schedule.step({idx}, {.target = targets, .losses = &losses});
    tp::StateDict grads;
    for (const auto& s : stages)
      for (const auto& [name, p] : s->module().named_parameters())
        if (!grads.contains(name)) grads.insert(name, p.grad());
    tp::StateDict out = nn::to_llama_state_dict(grads, config);
    float loss = 0.0f;
    for (const tp::Tensor& l : losses) loss += l.item() / static_cast<float>(losses.size());
    out.insert("loss", tp::from_vector({loss}, {1}));
    tp::save_safetensors(out, argv[3]);
    std::cout << "llama_pipeline_peer: " << pipe.num_stages() << " stages\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "llama_pipeline_peer: " << e.what() << "\n";
    return 1;
  }
}
